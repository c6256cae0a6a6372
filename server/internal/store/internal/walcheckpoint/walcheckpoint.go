// Package walcheckpoint copies SQLite's WAL into the database file off
// the store's writer's path, and has the writer finish the job between
// batches so that the WAL starts again from its beginning under
// continuous writes (see the store's RATIONALE.md). PostgreSQL
// checkpoints by itself and needs none of it.
package walcheckpoint

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Checkpointer copies the WAL into the database file on a connection of
// its own, a while after commits, so that the writer never does it
// inside a commit (SQLite's automatic checkpoint, which the writer's
// connection has off). A PASSIVE checkpoint waits for no reader or
// writer; it fsyncs the WAL before it copies from it, which makes durable
// whatever WriteUnsynced committed since the last fsync.
//
// Under continuous writes its checkpoints never finish the WAL: the
// writer appends while it copies. SQLite starts the WAL again from its
// beginning only when a write transaction begins with every frame
// copied, so the writer finishes the job itself, between batches, once
// the WAL holds about walTarget bytes (Restart).
type Checkpointer struct {
	db    *sql.DB
	delay time.Duration
	kick  chan struct{} // a commit happened
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	err   error // of closing
	// mu is held through each checkpoint, the Checkpointer's or the
	// writer's: SQLite lets one run at a time, and a second fails at
	// once (SQLITE_BUSY) rather than wait.
	mu sync.Mutex

	// caughtUp counts the Checkpointer's checkpoints that copied every
	// frame, after which the WAL may have started again without the
	// writer.
	caughtUp atomic.Int64

	// The writer's: the writes it committed since its last checkpoint,
	// how many it lets pass between two, and caughtUp as it last saw it.
	written, every int
	seen           int64
}

// walTarget is the WAL's size the writer keeps to, and SizeLimit the
// size SQLite cuts its file back to when the WAL starts again
// (journal_size_limit), as after a reader's snapshot kept it from
// starting again for a while. The limit leaves room for the target's
// overshoot (see Restart), so that in steady use the file is only ever
// overwritten in place: appending to it made every commit's fsync
// costlier.
const (
	walTarget = 2 << 20
	SizeLimit = 2 * walTarget
)

// FrameSize is SQLite's WAL frame: a page with a header of its own; the
// store's pages are SQLite's default size.
const FrameSize = 4096 + 24

// firstEvery is how many writes the writer lets pass before its first
// checkpoint, and maxEvery the most it ever lets pass: a write that
// changes no page (a refused one) must not put its checkpoints off for
// ever.
const firstEvery, maxEvery = 64, 4096

// New starts a checkpointer on db, the database's own connection to
// SQLite, which it closes, that checkpoints delay after a commit.
func New(db *sql.DB, delay time.Duration) *Checkpointer {
	db.SetMaxOpenConns(1)
	c := &Checkpointer{db: db, delay: delay, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		every: firstEvery}
	go c.run()
	return c
}

// Committed is the writer's, after each batch of writes it committed,
// outside any transaction: it wakes the checkpointer, and reports
// whether the writer is due to checkpoint itself (Restart), for the WAL
// to start again.
func (c *Checkpointer) Committed(writes int) bool {
	c.due()
	c.written += writes
	return c.written >= c.every
}

// HoldRestarts makes the writer never due to checkpoint: for a test that
// counts the WAL's frames, before the first write.
func (c *Checkpointer) HoldRestarts() { c.every = math.MaxInt }

// Row is the result of the checkpoint's PRAGMA.
type Row interface{ Scan(...any) error }

// Restart checkpoints the WAL on the writer's connection, by queryRow, between
// two batches: a PASSIVE checkpoint from the only writer has no writer
// appending while it copies, so it copies every frame (unless a reader's
// snapshot still needs one), and the next batch starts the WAL again
// from its beginning (unless a reader is reading the WAL just then). The
// Checkpointer has copied most frames already, off the writer's path;
// this copies those since, and fsyncs the database file.
//
// It then sets how many writes pass before the next, from the frames
// these writes made, for the WAL to hold about walTarget bytes: a count,
// not a time, so that the WAL's size does not depend on how fast the
// disk is. While the Checkpointer checkpoints, the writer lets batches
// pass rather than wait for it, up to half as many writes again; then it
// waits. So the WAL holds at most about 1.5 walTarget, under
// SizeLimit, while the writes keep their size.
func (c *Checkpointer) Restart(queryRow func(query string) Row) {
	if c.written < c.every+c.every/2 {
		if !c.mu.TryLock() {
			return
		}
	} else {
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	var busy, frames, copied int
	if err := queryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied); err != nil {
		// A failure (a full disk) is the next commit's to report.
		c.written = 0
		return
	}
	if busy != 0 { // another process is checkpointing: again after the next batch
		return
	}
	next := c.written * (walTarget / FrameSize) / max(frames, 1)
	if caughtUp := c.caughtUp.Load(); caughtUp != c.seen {
		// The Checkpointer copied every frame since the last round, and
		// the WAL may have started again then: these writes may have made
		// more frames than it holds now. Fewer writes, never more.
		c.seen = caughtUp
		next = min(next, c.every)
	}
	c.every = min(maxEvery, max(1, next))
	c.written = 0
}

// due tells the Checkpointer that a commit happened. It never blocks the
// writer.
func (c *Checkpointer) due() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// run checkpoints delay after a commit, so that a burst of commits shares
// one checkpoint, until close.
func (c *Checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		select {
		case <-c.stop:
			return
		case <-time.After(c.delay):
		}
		// A failure (a full disk, say) is the writer's to report: the WAL
		// keeps what it holds, and the next commit brings another try.
		c.checkpoint()
	}
}

// checkpoint runs one PASSIVE checkpoint.
func (c *Checkpointer) checkpoint() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var busy, frames, copied int
	err := c.db.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
	if err != nil {
		return fmt.Errorf("store: checkpoint: %w", err)
	}
	if busy == 0 && copied == frames {
		c.caughtUp.Add(1)
	}
	return nil
}

// close stops the Checkpointer after a last checkpoint. It may be called
// again, and returns the first call's error. A nil Checkpointer has
// nothing to close.
func (c *Checkpointer) Close() error {
	if c == nil {
		return nil
	}
	c.once.Do(func() {
		close(c.stop)
		<-c.done
		c.err = errors.Join(c.checkpoint(), c.db.Close())
	})
	return c.err
}
