// Package store is the server's durable state in SQLite (modernc.org/sqlite,
// pure Go): enrolled devices with hashed tokens, sessions, every command with
// its results, and an append-only audit log.
//
// Writes go through one writer goroutine that commits whatever writes are
// waiting in a single transaction (group commit): each write is durable
// (synchronous=FULL) when [Store.Write] returns, and concurrent writers share
// one fsync. Reads use their own connections, which WAL mode lets run while
// the writer works.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Errors callers can test with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
	ErrClosed   = errors.New("store closed")
)

// maxBatch bounds how many writes share one transaction.
const maxBatch = 256

// Store is the server's database. It is safe for concurrent use.
type Store struct {
	wdb     *sql.DB // the writer's single connection
	rdb     *sql.DB // readers
	writes  chan writeReq
	closing chan struct{}
	closed  chan struct{}
	once    sync.Once
}

// Tx is one write's view of the current transaction. Its methods are the
// store's writes; a write that returns an error is rolled back alone.
type Tx struct {
	tx *sql.Tx
}

type writeReq struct {
	fn   func(*Tx) error
	done chan error
}

// Open opens or creates the database at path, brings its schema up to
// date, and starts the writer.
func Open(ctx context.Context, path string) (*Store, error) {
	wdb, err := openDB(path, "journal_mode(WAL)", "synchronous(FULL)")
	if err != nil {
		return nil, err
	}
	// One writer connection: SQLite has one writer anyway, and this rules
	// out SQLITE_BUSY between our own connections.
	wdb.SetMaxOpenConns(1)
	if err := migrate(ctx, wdb); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	rdb, err := openDB(path, "query_only(1)")
	if err != nil {
		wdb.Close()
		return nil, err
	}
	s := &Store{wdb: wdb, rdb: rdb, writes: make(chan writeReq), closing: make(chan struct{}), closed: make(chan struct{})}
	go s.writer()
	return s, nil
}

func openDB(path string, pragmas ...string) (*sql.DB, error) {
	q := url.Values{}
	for _, p := range append([]string{"busy_timeout(10000)", "foreign_keys(1)"}, pragmas...) {
		q.Add("_pragma", p)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return db, nil
}

// Close finishes the writes already queued and closes the database.
func (s *Store) Close() error {
	s.once.Do(func() { close(s.closing) })
	<-s.closed
	return errors.Join(s.wdb.Close(), s.rdb.Close())
}

// Write runs fn in the next group commit and returns once that commit is
// durable, or with fn's error (fn's statements are then rolled back) or the
// commit's. ctx bounds only the wait for a place in the queue: once fn is
// queued, Write reports its true outcome.
func (s *Store) Write(ctx context.Context, fn func(*Tx) error) error {
	req := writeReq{fn: fn, done: make(chan error, 1)}
	select {
	case s.writes <- req:
	case <-s.closing:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("store: waiting to write: %w", ctx.Err())
	}
	return <-req.done
}

// writer commits the queued writes in batches until Close.
func (s *Store) writer() {
	defer close(s.closed)
	for {
		var first writeReq
		select {
		case first = <-s.writes:
		case <-s.closing:
			return
		}
		batch := []writeReq{first}
	fill:
		for len(batch) < maxBatch {
			select {
			case r := <-s.writes:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		s.commit(batch)
	}
}

// commit runs a batch in one transaction, each write under its own
// savepoint so that one failing write does not undo the others.
func (s *Store) commit(batch []writeReq) {
	ctx := context.Background()
	errs := make([]error, len(batch))
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		for _, r := range batch {
			r.done <- fmt.Errorf("store: begin: %w", err)
		}
		return
	}
	for i, r := range batch {
		errs[i] = runSavepoint(ctx, tx, r.fn)
	}
	if err := tx.Commit(); err != nil {
		for i := range errs {
			errs[i] = errors.Join(errs[i], fmt.Errorf("store: commit: %w", err))
		}
	}
	for i, r := range batch {
		r.done <- errs[i]
	}
}

func runSavepoint(ctx context.Context, tx *sql.Tx, fn func(*Tx) error) error {
	if _, err := tx.ExecContext(ctx, "SAVEPOINT w"); err != nil {
		return fmt.Errorf("store: savepoint: %w", err)
	}
	err := fn(&Tx{tx: tx})
	if err != nil {
		if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO w"); rerr != nil {
			err = errors.Join(err, fmt.Errorf("store: rollback: %w", rerr))
		}
	}
	if _, rerr := tx.ExecContext(ctx, "RELEASE w"); rerr != nil {
		err = errors.Join(err, fmt.Errorf("store: release: %w", rerr))
	}
	return err
}

func (t *Tx) exec(query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(context.Background(), query, args...)
}

func (t *Tx) queryRow(query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(context.Background(), query, args...)
}

func now() string { return formatTime(time.Now()) }

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseTime(s sql.NullString) time.Time {
	if !s.Valid {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, s.String)
	return t
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
