package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Errors of the cluster's tables, to test with errors.Is.
var (
	// ErrNodeLive: another live node holds the node id.
	ErrNodeLive = errors.New("node id held by a live node")
	// ErrFenced: this node's lease on its id is no longer its own (the
	// cluster took it as dead, or another process took the id over).
	ErrFenced = errors.New("node lease lost")
	// ErrNeedsPostgres: the cluster's tables are used on PostgreSQL only,
	// whose clock every node shares.
	ErrNeedsPostgres = errors.New("cluster mode needs a PostgreSQL store")
)

// Node states in cluster_nodes.
const (
	NodeUp       = "up"
	NodeDraining = "draining"
	NodeGone     = "gone"
)

// clusterTables hold what running nodes hold, not the fleet: Copy leaves
// them out.
var clusterTables = []string{"cluster_nodes", "device_leases"}

// ClusterNode is a row of cluster_nodes, with whether its heartbeat is
// recent enough, on PostgreSQL's clock, for it to be alive.
type ClusterNode struct {
	ID          string
	Epoch       int64
	Version     int
	Address     string
	State       string
	StartedAt   time.Time
	HeartbeatAt time.Time
	// Alive: not gone, and heard from within the deadAfter asked for.
	Alive bool
}

// micros is d as a count of microseconds, PostgreSQL's interval unit.
func micros(d time.Duration) int64 { return d.Microseconds() }

// needsPostgres fails on SQLite, where the cluster's tables are unused.
func (t *Tx) needsPostgres() error {
	if t.s.dialect.backend() != Postgres {
		return ErrNeedsPostgres
	}
	return nil
}

// returning runs a write whose statement returns rows (RETURNING), each
// scanned by scan, counting them as changed rows as exec does.
func (t *Tx) returning(scan func(rowScanner) error, query string, args ...any) error {
	rows, err := t.query(query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		t.changes++
		if err := scan(rows); err != nil {
			return err
		}
	}
	return unavailable(rows.Err())
}

// JoinNode takes the lease on node id for a node speaking inter-node
// protocol version at address: a new row at epoch 1, or the row of a node
// that is gone or was last heard from more than deadAfter ago, at its
// epoch + 1. prev is the epoch taken over from a node that was not marked
// gone (its death was never announced), else 0. A live holder makes it
// fail with ErrNodeLive, naming the holder.
func (t *Tx) JoinNode(id string, version int, address string, deadAfter time.Duration) (epoch, prev int64, err error) {
	if err := t.needsPostgres(); err != nil {
		return 0, 0, err
	}
	// Locked, so that a node marking it gone meanwhile cannot announce
	// the death this join announces (prev).
	var was ClusterNode
	err = t.queryRow(`SELECT epoch, state FROM cluster_nodes WHERE node_id = ? FOR UPDATE`, id).Scan(&was.Epoch, &was.State)
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, 0, fmt.Errorf("store: join node %q: %w", id, err)
	}
	err = t.returning(func(r rowScanner) error { return r.Scan(&epoch) },
		`INSERT INTO cluster_nodes (node_id, epoch, version, address, state, started_at, heartbeat_at)
		 VALUES (?, 1, ?, ?, 'up', now(), now())
		 ON CONFLICT (node_id) DO UPDATE SET epoch = cluster_nodes.epoch + 1, version = excluded.version,
		   address = excluded.address, state = 'up', started_at = now(), heartbeat_at = now()
		 WHERE cluster_nodes.state = 'gone' OR cluster_nodes.heartbeat_at < now() - ?::bigint * interval '1 microsecond'
		 RETURNING epoch`, id, version, address, micros(deadAfter))
	switch {
	case err != nil:
		return 0, 0, fmt.Errorf("store: join node %q: %w", id, err)
	case epoch == 0:
		return 0, 0, t.liveHolder(id)
	case found && was.State != NodeGone:
		prev = was.Epoch
	}
	return epoch, prev, nil
}

// liveHolder is ErrNodeLive for node id, naming its holder.
func (t *Tx) liveHolder(id string) error {
	var addr string
	var age float64
	err := t.queryRow(`SELECT address, extract(epoch FROM now() - heartbeat_at) FROM cluster_nodes WHERE node_id = ?`, id).Scan(&addr, &age)
	if err != nil {
		return fmt.Errorf("store: join node %q: %w", id, ErrNodeLive)
	}
	return fmt.Errorf("store: join node %q: %w (epoch at %s, heartbeat %.1fs ago)", id, ErrNodeLive, addr, age)
}

// Heartbeat renews node id's lease at epoch on PostgreSQL's clock, and
// sets its state (NodeUp, NodeDraining). ErrFenced: the lease is no
// longer epoch's, or the cluster marked it gone.
func (t *Tx) Heartbeat(id string, epoch int64, state string) error {
	if err := t.needsPostgres(); err != nil {
		return err
	}
	res, err := t.exec(`UPDATE cluster_nodes SET heartbeat_at = now(), state = ?
		WHERE node_id = ? AND epoch = ? AND state <> 'gone'`, state, id, epoch)
	if err != nil {
		return fmt.Errorf("store: heartbeat of node %q epoch %d: %w", id, epoch, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: heartbeat of node %q epoch %d: %w", id, epoch, ErrFenced)
	}
	return nil
}

// LeaveNode marks node id's lease at epoch gone, as a node that stops
// does; a lease no longer epoch's is left as it is.
func (t *Tx) LeaveNode(id string, epoch int64) error {
	if err := t.needsPostgres(); err != nil {
		return err
	}
	_, err := t.exec(`UPDATE cluster_nodes SET state = 'gone' WHERE node_id = ? AND epoch = ?`, id, epoch)
	if err != nil {
		return fmt.Errorf("store: leave node %q epoch %d: %w", id, epoch, err)
	}
	return nil
}

// MarkDeadNodes marks gone every node not heard from within deadAfter
// and returns them: each is returned to exactly one caller, whichever
// marks it, however many nodes ask at once.
func (t *Tx) MarkDeadNodes(deadAfter time.Duration) ([]ClusterNode, error) {
	if err := t.needsPostgres(); err != nil {
		return nil, err
	}
	var dead []ClusterNode
	err := t.returning(func(r rowScanner) error {
		var n ClusterNode
		if err := r.Scan(&n.ID, &n.Epoch, &n.Version, &n.Address); err != nil {
			return err
		}
		n.State = NodeGone
		dead = append(dead, n)
		return nil
	}, `UPDATE cluster_nodes SET state = 'gone'
		WHERE state <> 'gone' AND heartbeat_at < now() - ?::bigint * interval '1 microsecond'
		RETURNING node_id, epoch, version, address`, micros(deadAfter))
	if err != nil {
		return nil, fmt.Errorf("store: mark dead nodes: %w", err)
	}
	return dead, nil
}

// ClusterNodes lists every node that ever joined, by id, each Alive if
// it is not gone and was heard from within deadAfter on PostgreSQL's
// clock.
func (s *Store) ClusterNodes(ctx context.Context, deadAfter time.Duration) ([]ClusterNode, error) {
	if s.dialect.backend() != Postgres {
		return nil, ErrNeedsPostgres
	}
	rows, err := s.readRows(ctx, `SELECT node_id, epoch, version, address, state, started_at, heartbeat_at,
		state <> 'gone' AND heartbeat_at >= now() - ?::bigint * interval '1 microsecond'
		FROM cluster_nodes ORDER BY node_id`, micros(deadAfter))
	if err != nil {
		return nil, fmt.Errorf("store: cluster nodes: %w", unavailable(err))
	}
	nodes, err := collect(rows, func(r rowScanner) (n ClusterNode, err error) {
		err = r.Scan(&n.ID, &n.Epoch, &n.Version, &n.Address, &n.State, &n.StartedAt, &n.HeartbeatAt, &n.Alive)
		return n, err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("store: cluster nodes: %w", unavailable(err))
	}
	return nodes, nil
}

// isClusterTable reports whether name is one of clusterTables.
func isClusterTable(name string) bool { return slices.Contains(clusterTables, name) }
