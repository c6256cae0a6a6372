// Package store is the server's durable state: enrolled devices with
// hashed tokens, sessions, every command with its results, and an
// append-only audit log. It keeps them in SQLite (modernc.org/sqlite, pure
// Go), one file for a single node, or in PostgreSQL (pgx), which several
// nodes can share: the same schema and the same methods on both, the SQL
// written once and turned into each database's by a dialect.
//
// Writes go through one writer goroutine that commits whatever writes are
// waiting in a single transaction (group commit): a write is durable
// (fsynced) when [Store.Write] returns, and concurrent writers share one
// fsync; [Store.WriteUnsynced] returns once its write is committed, which
// the next fsync makes durable. Reads use a bounded pool of connections of
// their own; idle ones are closed. On SQLite, WAL mode lets reads run while
// the writer works, and checkpoints run beside the writer, on a connection
// of their own; the writer finishes one between batches once the WAL has
// grown by about 2 MB, so that the WAL starts again from its beginning
// under continuous writes. On PostgreSQL the writer is one connection
// too, replaced when it breaks, and sends each transaction's statements
// with its COMMIT in one round trip.
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/edgeaip/edgeaip/internal/privatedir"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/driverstmt"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/walcheckpoint"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/dberr"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// Errors callers can test with errors.Is.
var (
	ErrNotFound = sqlrow.ErrNotFound
	ErrExists   = sqlrow.ErrExists
	ErrClosed   = errors.New("store closed")
)

// maxBatch bounds how many writes share one transaction.
const maxBatch = 256

// Store is the server's database. It is safe for concurrent use. Its
// reads are grouped by what they keep, as [Tx]'s writes are, each group
// reached by a method of the same name (Commands, Sessions, Devices,
// Identities, Audit, IdempotencyKeys, Cluster).
type Store struct {
	dialect dialect
	wdb     *sql.DB
	conn    *sql.Conn // the writer's connection: only the writer goroutine uses it
	rdb     *sql.DB   // readers
	writes  chan writeReq
	closing chan struct{}
	closed  chan struct{}
	once    sync.Once
	// stmts are the writer's statements, prepared on its driver
	// connection, by SQL text: parsing each statement anew cost more than
	// the rest of a small write.
	stmts map[string]*driverstmt.Stmt
	// args is the writer's buffer of a statement's arguments.
	args []driver.NamedValue
	// pgStmts are the PostgreSQL writer's statements that go out in
	// pipelines, prepared on its connection, by SQL text.
	pgStmts map[string]*pgconn.StatementDescription
	// reads are the readers' prepared statements, by SQL text.
	reads sync.Map
	// failing says whether writes fail for the database's own reasons.
	failing failing
	// synced is the SQLite writer connection's synchronous setting:
	// whether its commits fsync. The writer's.
	synced bool
	// ckpt checkpoints SQLite's WAL; nil on PostgreSQL, which checkpoints
	// by itself.
	ckpt *walcheckpoint.Checkpointer
}

// Tx is one write's view of the current transaction. The store's writes
// are grouped by what they keep, each group reached by a method of Tx
// (Commands, Sessions, Devices, Identities, Audit, IdempotencyKeys,
// Cluster); a write that returns an error is rolled back alone.
type Tx struct {
	s *Store
	c driverstmt.Conn // the driver's connection, lent for the batch
	// changes counts the rows the transaction's statements changed: a
	// write that fails having changed none needs nothing undone.
	changes int64
	// pipe queues the statements on PostgreSQL (writer_pipeline.go); nil
	// on SQLite, whose statements run as they come.
	pipe *pipeline
	// cautious: see batchWrites.cautious.
	cautious bool
}

type writeReq struct {
	fn   func(*Tx) error
	sync bool // the write returns once it is durable, not just committed
	done chan error
	// state is writeWaiting until its caller gives it up (writeGivenUp),
	// or the writer takes it into a COMMIT (writeCommitting), whichever
	// comes first; nil: it cannot be given up.
	state *atomic.Int32
}

// The states of a write: see writeReq.state.
const (
	writeWaiting int32 = iota
	writeGivenUp
	writeCommitting
)

// giveUp marks r given up by its caller, unless the writer has taken it
// into a COMMIT, and reports whether it did.
func (r writeReq) giveUp() bool {
	return r.state != nil && r.state.CompareAndSwap(writeWaiting, writeGivenUp)
}

// givenUp reports whether r's caller gave it up: it must not be committed.
func (r writeReq) givenUp() bool { return r.state != nil && r.state.Load() == writeGivenUp }

// take keeps r's caller from giving it up from now on, as its batch
// commits, and reports whether it could: false if the caller gave it up
// first.
func (r writeReq) take() bool {
	return r.state == nil || r.state.CompareAndSwap(writeWaiting, writeCommitting) || r.state.Load() == writeCommitting
}

// errGivenUp is the outcome the writer sets for a write its caller gave
// up, which nobody reads: the caller returned its own.
var errGivenUp = errors.New("store: write given up by its caller")

// Options tune a Store. The zero value gives the defaults.
type Options struct {
	// Readers bounds the connections that serve reads: a read beyond them
	// waits for one to be free. Default DefaultReaders().
	Readers int
	// ReaderIdle closes a reader connection unused this long, with the
	// memory and files it holds. Default 60 s.
	ReaderIdle time.Duration
	// CheckpointDelay is how long after a commit the checkpointer copies
	// SQLite's WAL into the database; it fsyncs the WAL first, which makes
	// the writes of WriteUnsynced durable if no Write did so before.
	// Default 100 ms. PostgreSQL has its own checkpoints and WAL writer.
	CheckpointDelay time.Duration
}

// DefaultReaders is the default size of the reader pool: max(4, 2 ×
// GOMAXPROCS). Reads are short and CPU-bound in the pure-Go SQLite, so
// more connections than that only hold memory (a page cache each) and
// files.
func DefaultReaders() int { return max(4, 2*runtime.GOMAXPROCS(0)) }

func (o Options) withDefaults() Options {
	if o.Readers <= 0 {
		o.Readers = DefaultReaders()
	}
	if o.ReaderIdle <= 0 {
		o.ReaderIdle = time.Minute
	}
	if o.CheckpointDelay <= 0 {
		o.CheckpointDelay = 100 * time.Millisecond
	}
	return o
}

// Open opens the database at location, brings its schema up to date,
// and starts the writer. location is a PostgreSQL URL (postgres://…) or
// the path of a SQLite file, created if missing.
func Open(ctx context.Context, location string, opts Options) (*Store, error) {
	if IsPostgresURL(location) {
		return openPostgres(ctx, location, opts)
	}
	return openSQLite(ctx, location, opts)
}

// createPrivate makes the database file at path, empty, mode 0600, if it
// is missing: SQLite would make it 0644, and makes its -wal and -shm
// files with the database's mode, so all three, which hold token hashes,
// the audit log and every result, are the owner's alone.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, privatedir.File)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return f.Close()
}

// openSQLite opens or creates the SQLite database at path.
func openSQLite(ctx context.Context, path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := createPrivate(path); err != nil {
		return nil, err
	}
	// Checkpoints are the checkpointer's, not the commits': SQLite would
	// otherwise run one inside the commit that crosses 1000 pages of WAL.
	// journal_size_limit: see walcheckpoint.SizeLimit.
	wdb, err := openDB(path, "journal_mode(WAL)", "synchronous(FULL)", "wal_autocheckpoint(0)",
		fmt.Sprintf("journal_size_limit(%d)", walcheckpoint.SizeLimit))
	if err != nil {
		return nil, err
	}
	// One writer connection: SQLite has one writer anyway, and this rules
	// out SQLITE_BUSY between our own connections.
	wdb.SetMaxOpenConns(1)
	if err := migrate(ctx, wdb, sqliteDialect{}); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	conn, err := wdb.Conn(ctx)
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	rdb, err := openDB(path, "query_only(1)")
	if err != nil {
		conn.Close()
		wdb.Close()
		return nil, err
	}
	// Unbounded, a burst of 2000 reads opened a connection each and left
	// a thousand of them open: SQLite keeps a closed connection's files
	// while others hold locks on the database, for the next one to reuse.
	poolReaders(rdb, opts)
	cdb, err := openDB(path)
	if err != nil {
		rdb.Close()
		conn.Close()
		wdb.Close()
		return nil, err
	}
	return newStore(sqliteDialect{}, wdb, conn, rdb, walcheckpoint.New(cdb, opts.CheckpointDelay)), nil
}

// newStore starts the writer of a store on d's database, which writes on
// conn, a connection of wdb, and reads from rdb; ckpt, if not nil,
// checkpoints after its commits.
func newStore(d dialect, wdb *sql.DB, conn *sql.Conn, rdb *sql.DB, ckpt *walcheckpoint.Checkpointer) *Store {
	s := &Store{dialect: d, wdb: wdb, conn: conn, rdb: rdb, writes: make(chan writeReq), closing: make(chan struct{}),
		closed: make(chan struct{}), stmts: map[string]*driverstmt.Stmt{}, pgStmts: map[string]*pgconn.StatementDescription{},
		synced: true, ckpt: ckpt}
	go s.writer()
	return s
}

// committed is the writer's, after each batch of writes it committed,
// outside any transaction: it wakes the checkpointer, and checkpoints
// itself once the WAL is due to start again. A nil checkpointer
// (PostgreSQL's store) has nothing to do.
func (s *Store) committed(writes int) {
	c := s.ckpt
	if c == nil {
		return
	}
	if c.Committed(writes) {
		// A closed connection fails the next batch too, which reports it.
		s.betweenBatches(func(tx *Tx) {
			c.Restart(func(query string) walcheckpoint.Row { return tx.queryRow(query) })
		})
	}
}

// poolReaders bounds the readers to opts.Readers connections, closed once
// unused for opts.ReaderIdle.
func poolReaders(rdb *sql.DB, opts Options) {
	rdb.SetMaxOpenConns(opts.Readers)
	rdb.SetMaxIdleConns(opts.Readers)
	rdb.SetConnMaxIdleTime(opts.ReaderIdle)
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
	// Before the other connections: the last one to close checkpoints
	// what is left.
	errs := []error{s.ckpt.Close(), s.closeStmts()}
	s.reads.Range(func(_, st any) bool {
		errs = append(errs, st.(*sql.Stmt).Close())
		return true
	})
	if err := s.conn.Close(); !errors.Is(err, sql.ErrConnDone) { // done: the writer lost it and found none to replace it
		errs = append(errs, err)
	}
	return errors.Join(append(errs, s.wdb.Close(), s.rdb.Close())...)
}

// Write runs fn in the next group commit and returns once that commit is
// durable, or with fn's error (fn's statements are then rolled back) or the
// commit's. If ctx ends first, while fn waits in the queue or runs, even
// on a statement the database does not answer (a connection that drops
// every packet), Write returns at once with ctx's cause, and fn is never
// committed: its batch is rolled back and run again without it. Only
// once its batch's COMMIT is under way does Write wait for it whatever
// ctx does, and report its true outcome. fn may run more than once (when
// another write of its batch is undone, see commitErrs): it must only set
// what it returns.
func (s *Store) Write(ctx context.Context, fn func(*Tx) error) error {
	return s.write(ctx, writeReq{fn: fn, sync: true, done: make(chan error, 1)})
}

// WriteUnsynced is Write for what need not be durable before the caller
// goes on: it returns once fn is committed, without waiting for an fsync.
// The write is then seen by every read and survives the process's crash;
// a crash of the machine loses it until the next durable commit (any
// Write's, which fsyncs the WAL it is in) or, on SQLite, the next
// checkpoint, within Options.CheckpointDelay. On PostgreSQL the commit is
// asynchronous (synchronous_commit off), which a crash of the database
// server loses too, until its WAL writer flushes it, within three times
// its wal_writer_delay (600 ms by default).
func (s *Store) WriteUnsynced(ctx context.Context, fn func(*Tx) error) error {
	return s.write(ctx, writeReq{fn: fn, done: make(chan error, 1)})
}

func (s *Store) write(ctx context.Context, req writeReq) error {
	if ctx.Done() != nil {
		req.state = new(atomic.Int32)
	}
	select {
	case s.writes <- req:
	case <-s.closing:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("store: waiting to write: %w", context.Cause(ctx))
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		if req.giveUp() {
			return fmt.Errorf("store: write given up before it was committed: %w", context.Cause(ctx))
		}
		return <-req.done // its batch commits it now
	}
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
		s.committed(len(batch))
	}
}

// commit runs a batch in one transaction, fsynced if any of its writes
// asks for it, and tells each write how it ended. A write the database
// itself could not take (ErrUnavailable) may have rolled back the whole
// transaction, as SQLite may on SQLITE_FULL, so it fails the whole batch.
func (s *Store) commit(batch []writeReq) {
	errs := s.commitErrs(batch)
	s.failing.note(errs)
	for i, r := range batch {
		r.done <- errs[i]
	}
}

// commitErrs commits batch and returns each write's outcome. Writes run
// with no savepoint of their own: a savepoint makes SQLite copy every
// page a write touches to a sub-journal, which cost more than the writes,
// and costs PostgreSQL two round trips and a subtransaction. A write that
// fails having changed no row needs nothing undone, as when a write
// refuses what it is asked before writing, or when SQLite undoes the
// statement that failed. One that fails having changed rows, or whose
// statement failed on PostgreSQL (where that aborts the whole
// transaction), is undone by rolling the batch back and running it again
// without that write.
func (s *Store) commitErrs(batch []writeReq) []error {
	errs := make([]error, len(batch))
	w := &batchWrites{left: make([]bool, len(batch)), eager: make([]bool, len(batch))}
	for s.tryBatch(batch, w, errs) {
	}
	return errs
}

// batchWrites is what the tries of a batch learn of its writes.
type batchWrites struct {
	// left are the writes undone and left out.
	left []bool
	// eager are the writes whose statements go out one by one, on
	// PostgreSQL, as one of them failed in a pipeline.
	eager []bool
	// cautious, once a try's pipeline failed, sends every write's
	// changesRow as it comes, with its count read, rather than taking the
	// row as there: one miss after another would each cost the batch a
	// try, and their number squared in round trips, which a heartbeat in
	// the batch waits for.
	cautious bool
}

// tryBatch runs the writes of batch not left out in one transaction and
// commits it, setting each one's outcome in errs. It reports whether it
// rolled back to leave out a write that failed having changed rows or
// aborted the transaction, for the caller to run the rest again.
func (s *Store) tryBatch(batch []writeReq, w *batchWrites, errs []error) (again bool) {
	err := s.inTx(needsSync(batch, w.left), func(tx *Tx) { again = s.runBatch(tx, batch, w, errs) })
	if err != nil {
		failRest(errs, w.left, dberr.Unavailable(fmt.Errorf("store: begin: %w", err)))
	}
	return again
}

// runBatch is tryBatch's, once its transaction tx is begun.
func (s *Store) runBatch(tx *Tx, batch []writeReq, w *batchWrites, errs []error) (again bool) {
	tx.cautious = w.cautious
	left := w.left
	for i, r := range batch {
		if !left[i] && r.givenUp() {
			left[i], errs[i] = true, errGivenUp // never run
		}
		if left[i] {
			continue
		}
		if !tx.startWrite(i, w.eager[i]) {
			return s.pipelineFailed(tx, w, errs)
		}
		before, mark := tx.changes, tx.mark()
		errs[i] = r.fn(tx)
		if _, failed := tx.pipelineFailed(); failed {
			return s.pipelineFailed(tx, w, errs)
		}
		if errs[i] != nil {
			tx.dropSince(mark)
		}
		aborted := s.dialect.aborted(tx)
		if aborted && errs[i] == nil {
			errs[i] = errors.New("store: a write went on after one of its statements failed, which aborted the transaction")
		}
		switch {
		case errors.Is(errs[i], ErrUnavailable):
			tx.rollback() // may fail: SQLite may have rolled back already
			failRest(errs, left, dberr.Unavailable(fmt.Errorf("store: rolled back with a write the database could not take: %w", errs[i])))
			return false
		case errs[i] != nil && (tx.changes != before || aborted):
			if err := tx.rollback(); err != nil {
				failRest(errs, left, dberr.Unavailable(fmt.Errorf("store: rollback: %w", err)))
				return false
			}
			left[i] = true
			return true
		}
	}
	return s.commitBatch(tx, batch, w, errs)
}

// commitBatch commits tx once every write of batch has run in it. A
// write its caller may still give up is given up until the COMMIT is
// sent: on PostgreSQL, its statements go out first, alone, so that one
// that hangs on the wire can still be given up (RATIONALE.md, "A
// connection that answers nothing").
func (s *Store) commitBatch(tx *Tx, batch []writeReq, w *batchWrites, errs []error) (again bool) {
	left := w.left
	if mayGiveUp(batch, left) {
		tx.flush()
		if _, failed := tx.pipelineFailed(); failed {
			return s.pipelineFailed(tx, w, errs)
		}
	}
	if i, ok := takeAll(batch, left); !ok {
		// Its caller gave it up while it ran: undone, as a write that failed.
		if err := tx.rollback(); err != nil {
			failRest(errs, left, dberr.Unavailable(fmt.Errorf("store: rollback: %w", err)))
			return false
		}
		left[i], errs[i] = true, errGivenUp
		return true
	}
	if err := tx.commitTx(); err != nil {
		if _, failed := tx.pipelineFailed(); failed {
			return s.pipelineFailed(tx, w, errs)
		}
		// A failed COMMIT leaves the transaction open: end it, so that the
		// next batch starts clean.
		tx.rollback()
		for i := range errs {
			if !left[i] {
				errs[i] = errors.Join(errs[i], dberr.Unavailable(fmt.Errorf("store: commit: %w", err)))
			}
		}
	}
	return false
}

// pipelineFailed rolls tx back after a statement failed in its pipeline,
// and reports whether the batch is to run again: with the write the
// statement was of eager, which hears its statements' errors as they
// come. A statement that failed for the database's own reasons
// (ErrUnavailable), or of the transaction's own, fails the batch, as it
// would have without the pipeline.
func (s *Store) pipelineFailed(tx *Tx, w *batchWrites, errs []error) (again bool) {
	f, _ := tx.pipelineFailed()
	tx.rollback()
	w.cautious = true
	switch {
	case f.write < 0 || errors.Is(f.err, ErrUnavailable):
		failRest(errs, w.left, dberr.Unavailable(fmt.Errorf("store: rolled back: %w", f.err)))
		return false
	case w.eager[f.write]: // cannot be: its statements went out one by one
		w.left[f.write], errs[f.write] = true, f.err
	default:
		w.eager[f.write] = true
	}
	return true
}

// mayGiveUp reports whether a write of batch not left out may be given up
// by its caller.
func mayGiveUp(batch []writeReq, left []bool) bool {
	for i, r := range batch {
		if !left[i] && r.state != nil {
			return true
		}
	}
	return false
}

// takeAll takes every write of batch not left out into its COMMIT (take),
// and reports whether it could; if not, i is one whose caller gave it up.
func takeAll(batch []writeReq, left []bool) (i int, ok bool) {
	for i, r := range batch {
		if !left[i] && !r.take() {
			return i, false
		}
	}
	return 0, true
}

// needsSync reports whether a write of batch not left out must be durable
// when it returns.
func needsSync(batch []writeReq, left []bool) bool {
	for i, r := range batch {
		if r.sync && !left[i] {
			return true
		}
	}
	return false
}

// setSynced makes the writer's commits on SQLite fsync or not. SQLite
// takes the setting only outside a transaction; in WAL mode, NORMAL
// commits without an fsync and FULL fsyncs the WAL, and with it every
// commit before.
func (s *Store) setSynced(tx *Tx, synced bool) error {
	if s.synced == synced {
		return nil
	}
	q := "PRAGMA synchronous = NORMAL"
	if synced {
		q = "PRAGMA synchronous = FULL"
	}
	if err := tx.control(q); err != nil {
		return err
	}
	s.synced = synced
	return nil
}

// failRest sets the error of every write of errs not left out to err:
// those left out failed for their own reasons.
func failRest(errs []error, left []bool, err error) {
	for i := range errs {
		if !left[i] {
			errs[i] = err
		}
	}
}

// exec runs a statement of a write and counts the rows it changed
// (sqlite3_changes, PostgreSQL's command tag): every statement of a write
// that changes rows goes through it, so that a failed write is known to
// need undoing.
func (t *Tx) exec(query string, args ...any) (sql.Result, error) {
	if t.pipe != nil {
		return t.execPipelined(query, args)
	}
	st, nv, err := t.bound(query, args)
	if err != nil {
		return nil, err
	}
	res, err := st.Execer.ExecContext(context.Background(), nv)
	if err != nil {
		return nil, unavailable(err)
	}
	n, _ := res.RowsAffected()
	t.changes += n
	return res, nil
}

// control runs a statement that changes no rows: BEGIN, COMMIT, a PRAGMA.
func (t *Tx) control(query string) error {
	st, nv, err := t.bound(query, nil)
	if err != nil {
		return err
	}
	_, err = st.Execer.ExecContext(context.Background(), nv)
	return unavailable(err)
}

// controlOnce is control for a statement not kept prepared, sent as it
// is.
func (t *Tx) controlOnce(query string) error {
	_, err := t.c.ExecContext(context.Background(), query, nil)
	return unavailable(err)
}

// rowIter is rows to scan one by one (sqlrow.Rows).
type rowIter = sqlrow.Rows

func (t *Tx) query(query string, args ...any) (rowIter, error) {
	r, err := t.rows(query, args)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (t *Tx) rows(query string, args []any) (*driverstmt.Rows, error) {
	if t.pipe != nil {
		// A query is read at once, after what is queued.
		if err := t.flush(); err != nil {
			return nil, err
		}
	}
	st, nv, err := t.bound(query, args)
	if err != nil {
		return nil, err
	}
	r, err := st.Queryer.QueryContext(context.Background(), nv)
	if err != nil {
		return nil, unavailable(err)
	}
	return driverstmt.NewRows(r), nil
}

// rowScanner is a single row to scan (sqlrow.Row).
type rowScanner = sqlrow.Row

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

func (t *Tx) queryRow(query string, args ...any) rowScanner {
	r, err := t.rows(query, args)
	if err != nil {
		return errRow{err}
	}
	return firstRow{r}
}

// bound returns query prepared on the writer's connection, and args as
// its driver takes them.
func (t *Tx) bound(query string, args []any) (*driverstmt.Stmt, []driver.NamedValue, error) {
	st, ok := t.s.stmts[query]
	if !ok {
		var err error
		if st, err = driverstmt.Prepare(t.c, t.s.dialect.bind(query)); err != nil {
			return nil, nil, fmt.Errorf("store: prepare: %w", unavailable(err))
		}
		t.s.stmts[query] = st
	}
	nv, err := t.s.namedValues(t.c, st, args)
	return st, nv, err
}

// readStmt returns query prepared for the readers.
func (s *Store) readStmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.reads.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.rdb.PrepareContext(ctx, s.dialect.bind(query))
	if err != nil {
		return nil, fmt.Errorf("store: prepare: %w", err)
	}
	if prev, loaded := s.reads.LoadOrStore(query, st); loaded {
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

func (s *Store) readRow(ctx context.Context, query string, args ...any) rowScanner {
	st, err := s.readStmt(ctx, query)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, s.dialect.args(args)...)
}

func (s *Store) readRows(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := s.readStmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, s.dialect.args(args)...)
}
