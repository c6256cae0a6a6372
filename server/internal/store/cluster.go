package store

import (
	"context"
	"database/sql"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/clusterstate"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// Errors of the cluster's tables, to test with errors.Is.
var (
	// ErrNodeLive: another live node holds the node id.
	ErrNodeLive = clusterstate.ErrNodeLive
	// ErrFenced: this node's lease on its id is no longer its own (the
	// cluster took it as dead, or another process took the id over).
	ErrFenced = clusterstate.ErrFenced
	// ErrNeedsPostgres: the cluster's tables are used on PostgreSQL only,
	// whose clock every node shares.
	ErrNeedsPostgres = clusterstate.ErrNeedsPostgres
)

// Node states in cluster_nodes.
const (
	NodeUp       = clusterstate.NodeUp
	NodeDraining = clusterstate.NodeDraining
	NodeGone     = clusterstate.NodeGone
)

// ClusterNode is a row of cluster_nodes, with whether its heartbeat is
// recent enough, on PostgreSQL's clock, for it to be alive.
type ClusterNode = clusterstate.Node

// DeviceLease is who holds a device's link (clusterstate.DeviceLease).
type DeviceLease = clusterstate.DeviceLease

// ClusterWrites are a write's changes to a cluster's shared state: its
// nodes and the leases on devices. PostgreSQL only. Reached by
// [Tx.Cluster]; they belong to the write's transaction.
type ClusterWrites = clusterstate.Writes

// Cluster are this write's changes to what [ClusterWrites] keep.
func (t *Tx) Cluster() ClusterWrites { return clusterstate.WritesIn(partTx{t}) }

// ClusterReads are the reads of a cluster's shared state: its nodes and
// the leases on devices. Reached by [Store.Cluster].
type ClusterReads = clusterstate.Reads

// Cluster are the reads of what [ClusterReads] keep.
func (s *Store) Cluster() ClusterReads { return clusterstate.ReadsOf(partReader{s}) }

// isClusterTable reports whether name is one of the cluster's tables,
// which Copy leaves out.
func isClusterTable(name string) bool { return clusterstate.IsTable(name) }

// partTx is a write's transaction as the parts of the store in packages
// of their own (clusterstate, identities, rollouts, devices) write in it.
type partTx struct{ t *Tx }

// Postgres reports whether the store is on PostgreSQL.
func (c partTx) Postgres() bool { return c.t.s.dialect.backend() == Postgres }

// Exec runs a statement in the write's transaction.
func (c partTx) Exec(query string, args ...any) (sql.Result, error) {
	return c.t.exec(query, args...)
}

// Query runs a query in the write's transaction.
func (c partTx) Query(query string, args ...any) (sqlrow.Rows, error) {
	return c.t.query(query, args...)
}

// QueryRow runs a query of one row in the write's transaction.
func (c partTx) QueryRow(query string, args ...any) sqlrow.Row {
	return c.t.queryRow(query, args...)
}

// Returning runs a statement that returns rows, each scanned by scan.
func (c partTx) Returning(scan func(sqlrow.Row) error, query string, args ...any) error {
	return c.t.returning(scan, query, args...)
}

// partReader is the store as the parts of the store in packages of
// their own read it.
type partReader struct{ s *Store }

// Postgres reports whether the store is on PostgreSQL.
func (c partReader) Postgres() bool { return c.s.dialect.backend() == Postgres }

// ReadRow runs a query of one row on the readers.
func (c partReader) ReadRow(ctx context.Context, query string, args ...any) sqlrow.Row {
	return c.s.readRow(ctx, query, args...)
}

// ReadRows runs a query on the readers.
func (c partReader) ReadRows(ctx context.Context, query string, args ...any) (sqlrow.Rows, error) {
	rows, err := c.s.readRows(ctx, query, args...)
	if err != nil {
		return nil, err // not a nil *sql.Rows in a Rows that is not nil
	}
	return rows, nil
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
