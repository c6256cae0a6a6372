package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/driverstmt"
	"github.com/edgeaip/edgeaip/server/internal/store/schema"
)

// Backend names the database a Store keeps its rows in.
type Backend string

// The backends.
const (
	// SQLite is one file in the data dir: a single node's store.
	SQLite Backend = "sqlite"
	// Postgres is a PostgreSQL database, which several nodes can share.
	Postgres Backend = "postgres"
)

// Backend reports which database the store is on.
func (s *Store) Backend() Backend { return s.dialect.backend() }

// dialect is what differs between the databases in what the store sends
// them. The store's SQL is written once, with ? placeholders and types
// both take; a dialect turns it into its database's.
type dialect interface {
	backend() Backend
	// bind rewrites query, written with ? placeholders, into the
	// database's placeholders.
	bind(query string) string
	// args converts a statement's arguments into values the database
	// takes; it may reuse args.
	args(args []any) []any
	// begin opens the writer's transaction, whose commit is durable (an
	// fsync) when it returns if synced, else only committed.
	begin(tx *Tx, synced bool) error
	// pipeline is the queue a transaction's statements go out in
	// together, on the driver's connection c, or nil if they run as they
	// come.
	pipeline(c driverstmt.Conn) *pipeline
	// aborted reports whether a statement failed in tx has aborted the
	// whole transaction, which then takes nothing but a ROLLBACK.
	aborted(tx *Tx) bool
	// jsonTexts is a SELECT of the strings of the JSON array ?.
	jsonTexts() string
	// migration is the SQL of migration i (package schema) in the
	// database's dialect.
	migration(i int) string
	// schemaVersion counts the migrations applied, in tx, which it makes
	// the only one migrating.
	schemaVersion(ctx context.Context, tx *sql.Tx) (int, error)
	// setSchemaVersion records, in tx, that n migrations are applied.
	setSchemaVersion(ctx context.Context, tx *sql.Tx, n int) error

	// What a copy between stores needs (copy.go):
	// snapshot is a read transaction that sees one state throughout.
	snapshot() *sql.TxOptions
	// tablesQuery lists the store's tables, without the schema version's.
	tablesQuery() string
	// referencesQuery lists the tables the table $1 references.
	referencesQuery() string
	// columnsQuery lists the columns of the table $1, in order.
	columnsQuery() string
	// emptyTables is the statement that empties tables.
	emptyTables(tables []string) (string, error)
	// afterCopy sets what the rows copied into tx imply: the next value
	// of identity columns.
	afterCopy(tx *Tx) error
}

// sqliteDialect is SQLite's: the store's SQL as written.
type sqliteDialect struct{}

func (sqliteDialect) backend() Backend         { return SQLite }
func (sqliteDialect) bind(query string) string { return query }
func (sqliteDialect) args(args []any) []any    { return args }

// begin sets whether the commit fsyncs, which SQLite takes only outside
// a transaction, and takes the write lock at once: a deferred transaction
// that reads first could fail to upgrade with SQLITE_BUSY midway.
func (sqliteDialect) begin(tx *Tx, synced bool) error {
	if err := tx.s.setSynced(tx, synced); err != nil {
		return fmt.Errorf("synchronous setting: %w", err)
	}
	return tx.control("BEGIN IMMEDIATE")
}

// pipeline is nil: SQLite, in the process, answers each statement at
// once.
func (sqliteDialect) pipeline(driverstmt.Conn) *pipeline { return nil }

// aborted is false: SQLite undoes a statement that failed and keeps the
// transaction, except when it cannot take a write at all (SQLITE_FULL),
// which the writer sees as ErrUnavailable.
func (sqliteDialect) aborted(*Tx) bool { return false }

func (sqliteDialect) jsonTexts() string { return `SELECT value FROM json_each(?)` }

func (sqliteDialect) migration(i int) string { return schema.SQLite(i) }

func (sqliteDialect) schemaVersion(ctx context.Context, tx *sql.Tx) (int, error) {
	var v int
	err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
	return v, err
}

func (sqliteDialect) setSchemaVersion(ctx context.Context, tx *sql.Tx, n int) error {
	_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", n))
	return err
}

func (sqliteDialect) snapshot() *sql.TxOptions { return nil } // a read transaction's snapshot is taken at its first read

func (sqliteDialect) tablesQuery() string {
	return `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`
}

func (sqliteDialect) referencesQuery() string {
	return `SELECT DISTINCT "table" FROM pragma_foreign_key_list(?)`
}

func (sqliteDialect) columnsQuery() string {
	return `SELECT name FROM pragma_table_info(?) ORDER BY cid`
}

func (sqliteDialect) emptyTables([]string) (string, error) {
	return "", errors.New("a SQLite store is not emptied in place: remove its file, or name a new one")
}

// afterCopy needs nothing: SQLite's next rowid follows the largest key
// inserted.
func (sqliteDialect) afterCopy(*Tx) error { return nil }
