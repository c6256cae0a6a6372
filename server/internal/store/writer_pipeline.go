package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/pgbatch"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// A pipeline goes out before COMMIT once it holds this many statements,
// or parameters this large: a transaction of many rows (a store copied
// into PostgreSQL) is sent as it goes, not held whole in memory. A
// command's batch is far below either.
const (
	maxQueued      = 1000
	maxQueuedBytes = 1 << 20
)

// pipeline is the PostgreSQL writer's transaction on its way out: the
// statements of a batch's writes are queued without waiting for their
// answers and sent together, BEGIN first and COMMIT last, as one pgconn
// batch (every statement, then one Sync): one round trip per commit (see
// RATIONALE.md, "One round trip per commit"). A statement that fails
// makes PostgreSQL skip the rest, COMMIT included, so nothing of the
// batch is committed; the writer then rolls back and runs the batch
// again with the failing write eager: its statements go out one by one,
// and it hears their errors as it would have without the pipeline.
type pipeline struct {
	pc    *pgconn.PgConn
	types *pgtype.Map
	queue []pending
	// queuedBytes is the size of the queue's parameters.
	queuedBytes int
	// write is the index in its batch of the write whose statements are
	// queued now; -1 for the transaction's own (BEGIN, COMMIT).
	write int
	// eager: the current write's statements are sent as they come.
	eager bool
	// sent counts the round trips the transaction has made.
	sent int
	// failed is the first statement that failed, if one did: the
	// transaction is aborted.
	failed *pipelineFailure
}

// pending is a statement queued, with its parameters in PostgreSQL's text
// format, and where its answer goes.
type pending struct {
	sd     *pgconn.StatementDescription
	params [][]byte
	write  int
	res    *pipelinedResult
}

// pipelineFailure is a statement of a pipeline that failed, and the
// write it was of (-1: the transaction's own, or the connection).
type pipelineFailure struct {
	write int
	err   error
}

// pipelinedResult is the answer to a statement queued in a pipeline,
// known once the pipeline is sent: asking for it sends the pipeline.
type pipelinedResult struct {
	tx   *Tx
	rows int64
	err  error
	done bool
}

// LastInsertId is not PostgreSQL's: it has RETURNING instead.
func (r *pipelinedResult) LastInsertId() (int64, error) {
	return 0, errors.New("store: PostgreSQL has no LastInsertId")
}

// RowsAffected sends the statements queued so far, if the answer is not
// in yet, and reports how many rows the statement changed.
func (r *pipelinedResult) RowsAffected() (int64, error) {
	if !r.done {
		r.tx.flush()
	}
	return r.rows, r.err
}

// beginPipelined opens tx's transaction: BEGIN (and, unless synced, the
// setting that makes its commit asynchronous) queued, to go out with the
// batch. If the server has closed the connection meanwhile, or sent on it
// unasked (it does before it closes it: shutting down, terminated), BEGIN
// goes out alone first: if it fails, nothing of the batch was sent, and
// the writer takes a new connection and runs it there, as it did when
// every statement went alone. A pipeline that fails leaves unknown
// whether its COMMIT was applied (RATIONALE.md, "A commit whose answer is
// lost").
func (t *Tx) beginPipelined(synced bool) error {
	if t.pipe.pc.IsClosed() {
		return unavailable(fmt.Errorf("store: the writer's connection: %w", pgconn.ErrConnClosed))
	}
	if err := t.pipeControl("BEGIN"); err != nil {
		return err
	}
	if !synced {
		if err := t.pipeControl("SET LOCAL synchronous_commit = off"); err != nil {
			return err
		}
	}
	if !pgbatch.Unasked(t.pipe.pc.Conn()) {
		return nil
	}
	if err := t.flush(); err != nil {
		t.rollback() // or the next batch's BEGIN would find this transaction, aborted
		return fmt.Errorf("begin: %w", err)
	}
	return nil
}

// pipeControl queues a statement of the transaction's own.
func (t *Tx) pipeControl(query string) error {
	w := t.pipe.write
	t.pipe.write = -1
	_, err := t.pipelined(query, nil)
	t.pipe.write = w
	return err
}

// pipelined queues query, prepared on the connection once, with args,
// and sends it at once for an eager write, returning its error then.
func (t *Tx) pipelined(query string, args []any) (*pipelinedResult, error) {
	sd, err := t.pgStatement(query)
	if err != nil {
		return nil, err
	}
	params, err := pgbatch.Params(t.pipe.types, sd, t.s.dialect.args(args))
	if err != nil {
		return nil, err
	}
	r := &pipelinedResult{tx: t}
	t.pipe.queue = append(t.pipe.queue, pending{sd: sd, params: params, write: t.pipe.write, res: r})
	for _, p := range params {
		t.pipe.queuedBytes += len(p)
	}
	if t.pipe.eager || len(t.pipe.queue) >= maxQueued || t.pipe.queuedBytes >= maxQueuedBytes {
		if err := t.flush(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// pgStatement is query prepared on the writer's connection, by a name of
// the store's: one round trip the first time, none after.
func (t *Tx) pgStatement(query string) (*pgconn.StatementDescription, error) {
	if sd, ok := t.s.pgStmts[query]; ok {
		return sd, nil
	}
	name := "edgeaip_w" + strconv.Itoa(len(t.s.pgStmts))
	sd, err := t.pipe.pc.Prepare(context.Background(), name, t.s.dialect.bind(query), nil)
	if err != nil {
		return nil, fmt.Errorf("store: prepare: %w", unavailable(err))
	}
	t.s.pgStmts[query] = sd
	return sd, nil
}

// flush sends the statements queued, each after the last, and reads
// their answers: one round trip. After a statement that failed,
// PostgreSQL skips the rest, up to the batch's end; every statement from
// it on answers with its error, and the transaction is aborted.
func (t *Tx) flush() error {
	p := t.pipe
	if p == nil { // SQLite: nothing waits to go out
		return nil
	}
	if p.failed != nil {
		return p.failed.err
	}
	q := p.queue
	if len(q) == 0 {
		return nil
	}
	p.queue, p.queuedBytes = nil, 0
	p.sent++
	var b pgconn.Batch
	for _, e := range q {
		b.ExecStatement(e.sd, e.params, nil, nil)
	}
	mrr := p.pc.ExecBatch(context.Background(), &b)
	n := 0
	for n < len(q) && mrr.NextResult() {
		tag, err := mrr.ResultReader().Close()
		if err != nil {
			break
		}
		q[n].res.rows, q[n].res.done = tag.RowsAffected(), true
		t.changes += tag.RowsAffected()
		n++
	}
	err := mrr.Close()
	if err == nil && n < len(q) {
		err = fmt.Errorf("PostgreSQL answered %d statements of %d", n, len(q))
	}
	if err == nil {
		return nil
	}
	f := &pipelineFailure{write: -1, err: unavailable(err)}
	var pe *pgconn.PgError
	if n < len(q) && errors.As(err, &pe) {
		f.write = q[n].write
	}
	p.failed = f
	for _, e := range q[n:] {
		e.res.err, e.res.done = f.err, true
	}
	return f.err
}

// execPipelined is exec's on PostgreSQL: the statement is queued, and
// its error, if it fails, is known when its result is asked for, or at
// COMMIT, which it fails. An eager write hears it at once.
func (t *Tx) execPipelined(query string, args []any) (sql.Result, error) {
	r, err := t.pipelined(query, args)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// changesRow runs query, an INSERT, UPDATE or DELETE that changes at most
// one row, and reports whether it changed one. In a pipeline it is taken
// to, and the statement made to fail otherwise (pgbatch.ExpectRow), which
// aborts the transaction: the batch then runs again with this write
// eager, where the statement runs as it is and its count is read. So a
// write that decides on the count needs no round trip of its own when
// the row is there, as on the hot path it is.
func (t *Tx) changesRow(query string, args ...any) (bool, error) {
	if t.pipe == nil || t.pipe.eager || t.cautious {
		res, err := t.exec(query, args...)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n > 0, err
	}
	if _, err := t.pipelined(pgbatch.ExpectRow(t.s.dialect.bind(query)), args); err != nil {
		return false, err
	}
	return true, nil
}

// rollback ends tx's transaction, undoing it: if nothing of it was sent,
// by forgetting what was queued, else by a ROLLBACK.
func (t *Tx) rollback() error {
	if t.pipe == nil {
		return t.control("ROLLBACK")
	}
	p := t.pipe
	p.queue, p.queuedBytes, p.failed = nil, 0, nil
	if p.sent == 0 {
		return nil
	}
	if err := t.pipeControl("ROLLBACK"); err != nil {
		return err
	}
	return t.flush()
}

// commitTx commits tx's transaction: on PostgreSQL, the statements still
// queued go with the COMMIT, in one round trip.
func (t *Tx) commitTx() error {
	if t.pipe == nil {
		return t.control("COMMIT")
	}
	if err := t.pipeControl("COMMIT"); err != nil {
		return err
	}
	return t.flush()
}

// startWrite readies tx for write i of its batch, eager or not: before
// an eager write, what is queued goes out, so that its statements' errors
// are its own. It reports whether the transaction is still good.
func (t *Tx) startWrite(i int, eager bool) bool {
	if t.pipe == nil {
		return true
	}
	t.pipe.write, t.pipe.eager = i, eager
	if eager {
		t.flush()
	}
	return t.pipe.failed == nil
}

// queueMark is where a pipeline's queue stood: after how many round
// trips, and how many statements long.
type queueMark struct{ sent, queued int }

// mark is where tx's queue stands now, to drop the statements a write
// that failed queued after it and never sent (dropSince).
func (t *Tx) mark() queueMark {
	if t.pipe == nil {
		return queueMark{}
	}
	return queueMark{t.pipe.sent, len(t.pipe.queue)}
}

// dropSince forgets the statements queued since m and not yet sent: they
// changed nothing. After a round trip since m, all that is queued was
// queued since.
func (t *Tx) dropSince(m queueMark) {
	switch {
	case t.pipe == nil:
	case t.pipe.sent == m.sent:
		t.pipe.queue = t.pipe.queue[:m.queued]
	default:
		t.pipe.queue = t.pipe.queue[:0]
	}
}

// pipelineFailed reports the statement that failed in a pipelined write
// other than the eager one running, whose statements' errors are its
// own: the batch must run again, with the write it failed in eager.
func (t *Tx) pipelineFailed() (*pipelineFailure, bool) {
	if t.pipe == nil || t.pipe.failed == nil || (t.pipe.eager && t.pipe.failed.write == t.pipe.write) {
		return nil, false
	}
	return t.pipe.failed, true
}
