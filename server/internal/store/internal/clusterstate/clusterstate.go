// Package clusterstate is what the nodes of a cluster share in the
// store: their leases on their ids (cluster_nodes) and on the links of
// devices (device_leases), on PostgreSQL only, whose clock every node
// shares. The store reaches it by Tx.Cluster and Store.Cluster and hands
// it the narrow Tx and Reader below.
package clusterstate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/dberr"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// Tx is what the cluster's writes need of the store's write.
type Tx interface {
	sqlrow.Writer
	// Postgres reports whether the store is on PostgreSQL.
	Postgres() bool
	// Returning runs a statement that returns rows (RETURNING), each
	// scanned by scan and counted as a changed row.
	Returning(scan func(sqlrow.Row) error, query string, args ...any) error
}

// Reader is what the cluster's reads need of the store.
type Reader interface {
	sqlrow.Reader
	// Postgres reports whether the store is on PostgreSQL.
	Postgres() bool
}

// Writes are a write's changes to a cluster's shared state: its nodes
// and the leases on devices. PostgreSQL only.
type Writes struct{ t Tx }

// WritesIn are the cluster's writes in t.
func WritesIn(t Tx) Writes { return Writes{t} }

// Reads are the reads of a cluster's shared state: its nodes and the
// leases on devices.
type Reads struct{ r Reader }

// ReadsOf are the cluster's reads on r.
func ReadsOf(r Reader) Reads { return Reads{r} }

// needsPostgres fails on SQLite, where the cluster's tables are unused.
func needsPostgres(postgres bool) error {
	if !postgres {
		return ErrNeedsPostgres
	}
	return nil
}

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

// tables hold what running nodes hold, not the fleet: a copy between
// stores leaves them out.
var tables = []string{"cluster_nodes", "device_leases"}

// Node is a row of cluster_nodes, with whether its heartbeat is
// recent enough, on PostgreSQL's clock, for it to be alive.
type Node struct {
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

// JoinNode takes the lease on node id for a node speaking inter-node
// protocol version at address: a new row at epoch 1, or the row of a node
// that is gone or was last heard from more than deadAfter ago, at its
// epoch + 1. prev is the epoch taken over from a node that was not marked
// gone (its death was never announced), else 0. A live holder makes it
// fail with ErrNodeLive, naming the holder.
func (w Writes) JoinNode(id string, version int, address string, deadAfter time.Duration) (epoch, prev int64, err error) {
	if err := needsPostgres(w.t.Postgres()); err != nil {
		return 0, 0, err
	}
	// Locked, so that a node marking it gone meanwhile cannot announce
	// the death this join announces (prev).
	var was Node
	err = w.t.QueryRow(`SELECT epoch, state FROM cluster_nodes WHERE node_id = ? FOR UPDATE`, id).Scan(&was.Epoch, &was.State)
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, 0, fmt.Errorf("store: join node %q: %w", id, err)
	}
	err = w.t.Returning(func(r sqlrow.Row) error { return r.Scan(&epoch) },
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
		return 0, 0, w.liveHolder(id)
	case found && was.State != NodeGone:
		prev = was.Epoch
	}
	return epoch, prev, nil
}

// liveHolder is ErrNodeLive for node id, naming its holder.
func (w Writes) liveHolder(id string) error {
	var addr string
	var epoch int64
	var age float64
	err := w.t.QueryRow(`SELECT epoch, address, extract(epoch FROM now() - heartbeat_at) FROM cluster_nodes WHERE node_id = ?`, id).Scan(&epoch, &addr, &age)
	if err != nil {
		return fmt.Errorf("store: join node %q: %w", id, ErrNodeLive)
	}
	return fmt.Errorf("store: join node %q: %w (epoch %d at %s, heartbeat %.1fs ago)", id, ErrNodeLive, epoch, addr, age)
}

// Heartbeat renews node id's lease at epoch on PostgreSQL's clock, and
// sets its state (NodeUp, NodeDraining). ErrFenced: the lease is no
// longer epoch's, or the cluster marked it gone.
func (w Writes) Heartbeat(id string, epoch int64, state string) error {
	if err := needsPostgres(w.t.Postgres()); err != nil {
		return err
	}
	res, err := w.t.Exec(`UPDATE cluster_nodes SET heartbeat_at = now(), state = ?
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
func (w Writes) LeaveNode(id string, epoch int64) error {
	if err := needsPostgres(w.t.Postgres()); err != nil {
		return err
	}
	_, err := w.t.Exec(`UPDATE cluster_nodes SET state = 'gone' WHERE node_id = ? AND epoch = ?`, id, epoch)
	if err != nil {
		return fmt.Errorf("store: leave node %q epoch %d: %w", id, epoch, err)
	}
	return nil
}

// MarkDeadNodes marks gone every node not heard from within deadAfter
// and returns them: each is returned to exactly one caller, whichever
// marks it, however many nodes ask at once.
func (w Writes) MarkDeadNodes(deadAfter time.Duration) ([]Node, error) {
	if err := needsPostgres(w.t.Postgres()); err != nil {
		return nil, err
	}
	var dead []Node
	err := w.t.Returning(func(r sqlrow.Row) error {
		var n Node
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

// Nodes lists every node that ever joined, by id, each Alive if
// it is not gone and was heard from within deadAfter on PostgreSQL's
// clock.
func (q Reads) Nodes(ctx context.Context, deadAfter time.Duration) ([]Node, error) {
	if !q.r.Postgres() {
		return nil, ErrNeedsPostgres
	}
	rows, err := q.r.ReadRows(ctx, `SELECT node_id, epoch, version, address, state, started_at, heartbeat_at,
		state <> 'gone' AND heartbeat_at >= now() - ?::bigint * interval '1 microsecond'
		FROM cluster_nodes ORDER BY node_id`, micros(deadAfter))
	if err != nil {
		return nil, fmt.Errorf("store: cluster nodes: %w", dberr.Classify(err))
	}
	nodes, err := sqlrow.Collect(rows, func(r sqlrow.Row) (n Node, err error) {
		err = r.Scan(&n.ID, &n.Epoch, &n.Version, &n.Address, &n.State, &n.StartedAt, &n.HeartbeatAt, &n.Alive)
		return n, err
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("store: cluster nodes: %w", dberr.Classify(err))
	}
	return nodes, nil
}

// IsTable reports whether name is one of the cluster's tables, which a
// copy between stores leaves out.
func IsTable(name string) bool { return slices.Contains(tables, name) }

// DeviceLease is who holds a device's link: a node, at the node's epoch,
// under the lease's own epoch, which grows by one each time a node takes
// it. NodeID "" is a released lease. The holder's fields are those of
// its node's lease, read with it.
type DeviceLease struct {
	DeviceID  string
	NodeID    string
	NodeEpoch int64
	Epoch     int64
	TakenAt   time.Time
	// HolderAlive: the holder's node lease is at NodeEpoch, not gone, and
	// was renewed within the deadAfter asked for.
	HolderAlive bool
	// HolderVersion is the holder's inter-node protocol version.
	HolderVersion int
	// HolderSilent is how long ago, on PostgreSQL's clock, the holder
	// last renewed its node lease.
	HolderSilent time.Duration
}

// Held reports whether a node holds the lease.
func (l DeviceLease) Held() bool { return l.NodeID != "" }

// TakeDeviceLease makes node nodeID, at nodeEpoch, the holder of device
// deviceID's link, at the lease's next epoch, and returns the lease and
// the one it replaced (zero if none). ErrFenced: nodeID's lease on its id
// is not at nodeEpoch any more.
func (w Writes) TakeDeviceLease(deviceID, nodeID string, nodeEpoch int64) (lease, prev DeviceLease, err error) {
	if err := needsPostgres(w.t.Postgres()); err != nil {
		return lease, prev, err
	}
	var ok bool
	err = w.t.QueryRow(`SELECT EXISTS (SELECT 1 FROM cluster_nodes WHERE node_id = ? AND epoch = ? AND state <> 'gone')`,
		nodeID, nodeEpoch).Scan(&ok)
	if err == nil && !ok {
		err = fmt.Errorf("node %q epoch %d: %w", nodeID, nodeEpoch, ErrFenced)
	}
	if err != nil {
		return lease, prev, fmt.Errorf("store: take the lease of device %q: %w", deviceID, err)
	}
	err = w.t.QueryRow(`SELECT node_id, node_epoch, epoch FROM device_leases WHERE device_id = ? FOR UPDATE`, deviceID).
		Scan(&prev.NodeID, &prev.NodeEpoch, &prev.Epoch)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return lease, prev, fmt.Errorf("store: take the lease of device %q: %w", deviceID, err)
	}
	prev.DeviceID = deviceID
	lease = DeviceLease{DeviceID: deviceID, NodeID: nodeID, NodeEpoch: nodeEpoch}
	err = w.t.Returning(func(r sqlrow.Row) error { return r.Scan(&lease.Epoch, &lease.TakenAt) },
		`INSERT INTO device_leases (device_id, node_id, node_epoch, epoch, taken_at) VALUES (?, ?, ?, 1, now())
		 ON CONFLICT (device_id) DO UPDATE SET node_id = excluded.node_id, node_epoch = excluded.node_epoch,
		   epoch = device_leases.epoch + 1, taken_at = now()
		 RETURNING epoch, taken_at`, deviceID, nodeID, nodeEpoch)
	if err != nil {
		return lease, prev, fmt.Errorf("store: take the lease of device %q: %w", deviceID, err)
	}
	return lease, prev, nil
}

// ReleaseDeviceLease releases device deviceID's lease if it is still at
// epoch, and reports whether it was.
func (w Writes) ReleaseDeviceLease(deviceID string, epoch int64) (bool, error) {
	if err := needsPostgres(w.t.Postgres()); err != nil {
		return false, err
	}
	res, err := w.t.Exec(`UPDATE device_leases SET node_id = '' WHERE device_id = ? AND epoch = ? AND node_id <> ''`, deviceID, epoch)
	if err != nil {
		return false, fmt.Errorf("store: release the lease of device %q: %w", deviceID, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// leaseQuery reads leases with their holders' node leases.
const leaseQuery = `SELECT l.device_id, l.node_id, l.node_epoch, l.epoch, l.taken_at,
	COALESCE(n.epoch = l.node_epoch AND n.state <> 'gone' AND n.heartbeat_at >= now() - ?::bigint * interval '1 microsecond', false),
	COALESCE(n.version, 0), COALESCE(extract(epoch FROM now() - n.heartbeat_at), 0)::float8
	FROM device_leases l LEFT JOIN cluster_nodes n ON n.node_id = l.node_id`

func scanLease(r sqlrow.Row) (l DeviceLease, err error) {
	var silent float64
	err = r.Scan(&l.DeviceID, &l.NodeID, &l.NodeEpoch, &l.Epoch, &l.TakenAt, &l.HolderAlive, &l.HolderVersion, &silent)
	l.HolderSilent = time.Duration(silent * float64(time.Second))
	return l, err
}

// DeviceLeaseOf is device deviceID's lease, with its holder's liveness
// for deadAfter; ErrNotFound if no node ever held it.
func (q Reads) DeviceLeaseOf(ctx context.Context, deviceID string, deadAfter time.Duration) (DeviceLease, error) {
	if !q.r.Postgres() {
		return DeviceLease{}, ErrNeedsPostgres
	}
	l, err := scanLease(q.r.ReadRow(ctx, leaseQuery+` WHERE l.device_id = ?`, micros(deadAfter), deviceID))
	return l, sqlrow.Err(dberr.Classify(err), "lease of device %q", deviceID)
}

// DeviceLeases lists the leases held, by device.
func (q Reads) DeviceLeases(ctx context.Context, deadAfter time.Duration) ([]DeviceLease, error) {
	if !q.r.Postgres() {
		return nil, ErrNeedsPostgres
	}
	rows, err := q.r.ReadRows(ctx, leaseQuery+` WHERE l.node_id <> '' ORDER BY l.device_id`, micros(deadAfter))
	if err != nil {
		return nil, fmt.Errorf("store: device leases: %w", dberr.Classify(err))
	}
	leases, err := sqlrow.Collect(rows, scanLease, nil)
	if err != nil {
		return nil, fmt.Errorf("store: device leases: %w", dberr.Classify(err))
	}
	return leases, nil
}

// HoldsLease is an SQL condition, for a query of any table, that the
// node named by the expression node holds its lease at the epoch named
// by epoch: its row is at that epoch and not gone. It is what the
// sessions' adoption and a device lease take as a live holder, on the
// store's own state rather than any node's clock: a node only late with
// its heartbeats holds its lease until a sweep marks it gone.
func HoldsLease(node, epoch string) string {
	return `EXISTS (SELECT 1 FROM cluster_nodes WHERE cluster_nodes.node_id = ` + node +
		` AND cluster_nodes.epoch = ` + epoch + ` AND cluster_nodes.state <> 'gone')`
}
