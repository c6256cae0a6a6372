package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/edgeaip/edgeaip/server/internal/store/schema"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/driverstmt"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/pgbatch"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// IsPostgresURL reports whether location names a PostgreSQL database
// (postgres:// or postgresql://) rather than a SQLite file.
func IsPostgresURL(location string) bool {
	return strings.HasPrefix(location, "postgres://") || strings.HasPrefix(location, "postgresql://")
}

// openPostgres opens the PostgreSQL database that dsn (a postgres:// URL)
// names. Writes go through one connection, in group commits as on
// SQLite; reads through a pool of opts.Readers connections, read-only,
// closed after opts.ReaderIdle unused: an idle connection holds a server
// process.
func openPostgres(ctx context.Context, dsn string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	where := RedactURL(dsn)
	wcfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", where, err)
	}
	rcfg := wcfg.Copy()
	// The readers' counterpart of SQLite's query_only: a read that tried
	// to write would fail.
	rcfg.RuntimeParams["default_transaction_read_only"] = "on"
	wdb := stdlib.OpenDB(*wcfg)
	wdb.SetMaxOpenConns(1)
	d := postgresDialect{}
	if err := migrate(ctx, wdb, d); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("store: %s: %w", where, err)
	}
	conn, err := wdb.Conn(ctx)
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("store: %s: %w", where, err)
	}
	rdb := stdlib.OpenDB(*rcfg)
	poolReaders(rdb, opts)
	return newStore(d, wdb, conn, rdb, nil), nil // PostgreSQL checkpoints by itself
}

// RedactURL is a database URL fit for logs and errors: without its
// password, whether in its user part or its query (?password=), nor its
// other query values; a URL that does not parse is not shown at all.
func RedactURL(dsn string) string {
	if _, err := url.Parse(dsn); err != nil {
		return "the PostgreSQL database"
	}
	return protocol.RedactURL(dsn)
}

// postgresDialect is PostgreSQL's: $n placeholders, BIGINT for SQLite's
// 64-bit INTEGER, its own triggers, and a table for the schema version.
type postgresDialect struct{}

func (postgresDialect) backend() Backend         { return Postgres }
func (postgresDialect) bind(query string) string { return pgbatch.Numbered(query) }
func (postgresDialect) jsonTexts() string {
	return `SELECT json_array_elements_text(?::json)`
}

// begin opens the transaction, committed asynchronously unless synced
// (see WriteUnsynced), in the pipeline that sends the batch with its
// COMMIT (writer_pipeline.go). SET LOCAL lasts until the transaction
// ends, so the setting outlives neither a rollback nor a replaced
// connection, and a synced commit keeps the database's own
// synchronous_commit (on, or waiting for a synchronous standby too).
func (postgresDialect) begin(tx *Tx, synced bool) error {
	return tx.beginPipelined(synced)
}

// pipeline queues the writer's statements on pgx's connection, to send
// them together.
func (postgresDialect) pipeline(c driverstmt.Conn) *pipeline {
	sc, ok := c.(*stdlib.Conn)
	if !ok {
		return nil
	}
	return &pipeline{pc: sc.Conn().PgConn(), types: sc.Conn().TypeMap()}
}

// aborted reads the transaction status of the writer's connection, as the
// server last reported it: after any statement that failed, PostgreSQL
// refuses every other until ROLLBACK, and answers COMMIT by rolling back,
// which database/sql reports as success.
func (postgresDialect) aborted(tx *Tx) bool {
	pc, ok := tx.c.(*stdlib.Conn)
	return ok && pc.Conn().PgConn().TxStatus() == 'E'
}

// args turns bools into the 0 and 1 that SQLite stores, as the store's
// flag columns are integers on both, and makes strings valid UTF-8
// without NUL, as PostgreSQL's text requires: a device's error that held
// a NUL byte would otherwise be refused, where SQLite kept it. Such bytes
// become U+FFFD.
func (postgresDialect) args(args []any) []any {
	for i, a := range args {
		switch v := a.(type) {
		case bool:
			args[i] = pgbatch.BoolInt(v)
		case string:
			args[i] = validText(v)
		}
	}
	return args
}

// validText is s as PostgreSQL's text can hold it.
func validText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
}

func (postgresDialect) migration(i int) string { return schema.Postgres(i) }

// migrationLock is the advisory lock a node holds while it migrates, so
// that nodes starting together apply each migration once.
const migrationLock = 0x65646765616970 // "edgeaip"

func (postgresDialect) schemaVersion(ctx context.Context, tx *sql.Tx) (int, error) {
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)`); err != nil {
		return 0, err
	}
	var v int
	err := tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

func (postgresDialect) setSchemaVersion(ctx context.Context, tx *sql.Tx, n int) error {
	res, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = $1`, n)
	if err != nil {
		return err
	}
	if rows, _ := res.RowsAffected(); rows == 0 {
		_, err = tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES ($1)`, n)
	}
	return err
}

// snapshot is REPEATABLE READ: every statement sees the state of the
// first.
func (postgresDialect) snapshot() *sql.TxOptions {
	return &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}
}

func (postgresDialect) tablesQuery() string {
	return `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'schema_version'`
}

func (postgresDialect) referencesQuery() string {
	return `SELECT DISTINCT u.table_name FROM information_schema.table_constraints c
		JOIN information_schema.constraint_column_usage u ON u.constraint_schema = c.constraint_schema AND u.constraint_name = c.constraint_name
		WHERE c.constraint_type = 'FOREIGN KEY' AND c.table_schema = current_schema() AND c.table_name = $1`
}

func (postgresDialect) columnsQuery() string {
	return `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`
}

// emptyTables truncates: DELETE would fire the audit log's append-only
// trigger, which TRUNCATE does not.
func (postgresDialect) emptyTables(tables []string) (string, error) {
	return `TRUNCATE ` + strings.Join(tables, ", ") + ` RESTART IDENTITY`, nil
}

// afterCopy moves each identity column's sequence past the largest value
// copied, which an INSERT that names it leaves where it was.
func (postgresDialect) afterCopy(tx *Tx) error {
	rows, err := tx.query(`SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND is_identity = 'YES'`)
	if err != nil {
		return fmt.Errorf("store: identity columns: %w", err)
	}
	ids, err := sqlrow.Collect(rows, func(r rowScanner) (c [2]string, err error) { return c, r.Scan(&c[0], &c[1]) }, nil)
	if err != nil {
		return fmt.Errorf("store: identity columns: %w", err)
	}
	for _, c := range ids {
		q := fmt.Sprintf(`SELECT setval(pg_get_serial_sequence('%[1]s', '%[2]s'), COALESCE((SELECT max(%[2]s) FROM %[1]s), 0) + 1, false)`, c[0], c[1])
		if _, err := tx.exec(q); err != nil {
			return fmt.Errorf("store: identity %s.%s: %w", c[0], c[1], err)
		}
	}
	return nil
}

// reconnectTimeout bounds how long the writer waits for a connection to
// replace one that broke: a database that is down fails the batch rather
// than holding every write.
const reconnectTimeout = 5 * time.Second
