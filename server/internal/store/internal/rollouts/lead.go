package rollouts

import (
	"context"
	"fmt"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/clusterstate"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// In a cluster one node leads each rollout: the one its row names, at
// the epoch of that node's lease. A node takes the lead of a rollout
// that no node leads, or whose leader no longer holds its lease at that
// epoch (gone, or superseded by a later process of its id), as a dead
// node's sessions are adopted: a node only late with its heartbeats
// keeps it until a sweep marks it gone.

// Leader is who leads a rollout, and whether that node still holds its
// lease at that epoch.
type Leader struct {
	Node  string
	Epoch int64
	Held  bool
}

// Leader is who leads rollout name, or ErrNotFound.
func (q Reads) Leader(ctx context.Context, name string) (Leader, error) {
	var l Leader
	err := q.r.ReadRow(ctx, `SELECT leader_node, leader_epoch, `+clusterstate.HoldsLease("leader_node", "leader_epoch")+`
		FROM rollouts WHERE name = ?`, name).Scan(&l.Node, &l.Epoch, &l.Held)
	return l, sqlrow.Err(err, "rollout %s", name)
}

// TakeLead makes node, at epoch, the leader of rollout name if no node
// leads it, if its leader no longer holds its lease at its epoch, or if
// node leads it already; and only while node holds its own lease at
// epoch. It reports whether node leads it. One conditional UPDATE: of
// two nodes taking it at once, one wins (on PostgreSQL the second waits
// for the first's row lock, then finds a leader that holds its lease).
func (w Writes) TakeLead(name, node string, epoch int64) (bool, error) {
	res, err := w.t.Exec(`UPDATE rollouts SET leader_node = ?, leader_epoch = ?
		WHERE name = ? AND (leader_node = '' OR (leader_node = ? AND leader_epoch = ?)
			OR NOT `+clusterstate.HoldsLease("rollouts.leader_node", "rollouts.leader_epoch")+`)
		AND `+clusterstate.HoldsLease("?", "?"),
		node, epoch, name, node, epoch, node, epoch)
	if err != nil {
		return false, fmt.Errorf("store: rollout %s: take the lead for node %q epoch %d: %w", name, node, epoch, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// ReleaseLead gives up node's lead of rollout name at epoch, if it still
// has it, so that another node takes it at once.
func (w Writes) ReleaseLead(name, node string, epoch int64) error {
	_, err := w.t.Exec(`UPDATE rollouts SET leader_node = '', leader_epoch = 0 WHERE name = ? AND leader_node = ? AND leader_epoch = ?`,
		name, node, epoch)
	if err != nil {
		return fmt.Errorf("store: rollout %s: release the lead of node %q epoch %d: %w", name, node, epoch, err)
	}
	return nil
}
