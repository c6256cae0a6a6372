package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// checkpointer copies the WAL into the database file on a connection of
// its own, a while after commits, so that the writer never does it
// inside a commit (SQLite's automatic checkpoint, which the writer's
// connection has off). A PASSIVE checkpoint waits for no reader or
// writer; it fsyncs the WAL before it copies from it, which makes durable
// whatever WriteUnsynced committed since the last fsync.
type checkpointer struct {
	db    *sql.DB
	delay time.Duration
	kick  chan struct{} // a commit happened
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	err   error // of closing
}

func newCheckpointer(path string, delay time.Duration) (*checkpointer, error) {
	db, err := openDB(path)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	c := &checkpointer{db: db, delay: delay, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c, nil
}

// due tells the checkpointer that a commit happened. It never blocks the
// writer. A nil checkpointer (PostgreSQL's store) has nothing to do.
func (c *checkpointer) due() {
	if c == nil {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// run checkpoints delay after a commit, so that a burst of commits shares
// one checkpoint, until close.
func (c *checkpointer) run() {
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
func (c *checkpointer) checkpoint() error {
	var busy, frames, copied int
	err := c.db.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
	if err != nil {
		return fmt.Errorf("store: checkpoint: %w", err)
	}
	return nil
}

// close stops the checkpointer after a last checkpoint. It may be called
// again, and returns the first call's error. A nil checkpointer has
// nothing to close.
func (c *checkpointer) close() error {
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
