// Package unrecorded keeps the writes the server's store could not take
// for its own reasons (a full disk, say) and retries them, in order,
// until it does: a device's results, a command's failure, a task's start
// and end. See server/RATIONALE.md, "A full disk".
package unrecorded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/store"
)

// Bounds on the writes kept for the store, by default; see the server's
// StoreConfig.UnrecordedWrites and UnrecordedBytes.
const (
	DefaultMaxWrites = 10_000
	DefaultMaxBytes  = 64 << 20
)

// FailureBytes is about what a kept failure of a command, or a start or
// end of a session without its plan and result, records.
const FailureBytes = 1 << 10

// How long the first retry of kept writes waits, and the longest any
// waits: it doubles while the store refuses them.
const (
	retryUnrecordedFirst = 250 * time.Millisecond
	retryUnrecordedMax   = 5 * time.Second
)

// Writes keeps the writes the store could not take for its own
// reasons (store.ErrUnavailable: a full disk, say) and retries them, in
// the order they failed, until it takes them: a device's results, a
// command's failure, a task's start and end. Without it, a task whose end
// was not recorded stayed running, and results waited in the device's
// outbox until it happened to register again. It keeps at most maxWrites
// writes and maxBytes of what they record; past either, a write is
// dropped. They live in memory: see RATIONALE.md, "A full disk", for what
// a restart does with those still kept.
type Writes struct {
	store     *store.Store
	log       *slog.Logger
	maxWrites int
	maxBytes  int64
	dropped   func() // counts a dropped write

	mu    sync.Mutex
	queue []*Write
	bytes int64
	keys  map[string]bool
	cause error // why the store refused the last write kept or retried

	wake chan struct{} // a write was kept
	stop chan struct{}
	done chan struct{} // closed when run returns
}

// Write is a write to retry.
type Write struct {
	What string // for the logs: "results of command X"
	// Key, if set, keeps one write per key: the same results, sent again,
	// are kept once.
	Key  string
	Size int64 // about what it records, in bytes
	Fn   func(*store.Tx) error
	// Recorded, if set, is called once the store took Fn (nil), or refused
	// it for what it asked (Fn's error).
	Recorded func(error)
}

// New keeps, for st, at most maxWrites writes and maxBytes of what they
// record, calling dropped for each write dropped past either; it retries
// them until Close.
func New(st *store.Store, maxWrites int, maxBytes int64, dropped func(), log *slog.Logger) *Writes {
	u := &Writes{store: st, log: log, maxWrites: maxWrites, maxBytes: maxBytes, dropped: dropped,
		keys: map[string]bool{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go u.run()
	return u
}

// Record runs w now and, if the store cannot take it, keeps it to retry.
// It returns the first attempt's error: one of store.ErrUnavailable means
// w is kept, or was dropped past the bounds (logged, and counted).
func (u *Writes) Record(ctx context.Context, w Write) error {
	err := u.store.Write(ctx, w.Fn)
	if errors.Is(err, store.ErrUnavailable) {
		u.Keep(w, err)
	}
	return err
}

// Keep adds w, which the store refused with cause, to the writes to retry
// and reports whether it did: false if it is past the bounds, and is
// dropped.
func (u *Writes) Keep(w Write, cause error) bool {
	u.mu.Lock()
	u.cause = store.UnavailableCause(cause)
	switch {
	case w.Key != "" && u.keys[w.Key]:
		u.mu.Unlock()
		return true
	case len(u.queue) >= u.maxWrites || u.bytes+w.Size > u.maxBytes:
		n, bytes := len(u.queue), u.bytes
		u.mu.Unlock()
		u.dropped()
		u.log.Error("write not recorded, and not kept: the server keeps no more", "write", w.What, "kept", n,
			"kept_bytes", bytes, "max", u.maxWrites, "max_bytes", u.maxBytes)
		return false
	}
	u.queue = append(u.queue, &w)
	u.bytes += w.Size
	if w.Key != "" {
		u.keys[w.Key] = true
	}
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
	return true
}

// HasRoom reports whether n more writes of bytes in all could be kept now.
func (u *Writes) HasRoom(n int, bytes int64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.queue)+n <= u.maxWrites && u.bytes+bytes <= u.maxBytes
}

// Pending counts the kept writes and their bytes.
func (u *Writes) Pending() (int, int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.queue), u.bytes
}

// run retries the kept writes until close, waiting longer each time the
// store refuses them. A write kept while a retry is due does not put it
// off: under a steady stream of refused writes, retries still come.
func (u *Writes) run() {
	defer close(u.done)
	delay := retryUnrecordedFirst
	retry := time.NewTimer(delay)
	retry.Stop()
	due := false
	for {
		select {
		case <-u.stop:
			retry.Stop()
			return
		case <-u.wake:
			if !due {
				retry.Reset(delay)
				due = true
			}
		case <-retry.C:
			due = false
			if u.flush() {
				delay = retryUnrecordedFirst
				continue
			}
			delay = min(2*delay, retryUnrecordedMax)
			retry.Reset(delay)
			due = true
		}
	}
}

// flush writes the kept writes in order, and reports whether the store
// took them all; it stops at the first the store cannot take.
func (u *Writes) flush() bool {
	for {
		u.mu.Lock()
		if len(u.queue) == 0 {
			u.mu.Unlock()
			return true
		}
		w := u.queue[0]
		u.mu.Unlock()
		err := u.store.Write(context.Background(), w.Fn)
		if errors.Is(err, store.ErrUnavailable) {
			u.mu.Lock()
			u.cause = store.UnavailableCause(err)
			u.mu.Unlock()
			return false
		}
		u.mu.Lock()
		u.queue = u.queue[1:]
		u.bytes -= w.Size
		delete(u.keys, w.Key)
		u.mu.Unlock()
		if err != nil {
			u.log.Warn("kept write refused by the store", "write", w.What, "err", err)
		} else {
			u.log.Info("kept write recorded", "write", w.What)
		}
		if w.Recorded != nil {
			w.Recorded(err)
		}
	}
}

// Close stops the retries and tries the kept writes once more. What the
// store still cannot take is lost with the process: each write says what
// then happens (logged).
func (u *Writes) Close() {
	close(u.stop)
	<-u.done
	if u.flush() {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, w := range u.queue {
		u.log.Error("kept write lost at shutdown: the store still cannot take it", "write", w.What)
	}
}

// Health says why the store is not healthy, or "" if it is: writes are
// kept that it has not taken yet, or writes fail.
func (u *Writes) Health() string {
	u.mu.Lock()
	n, bytes, cause := len(u.queue), u.bytes, u.cause
	u.mu.Unlock()
	if n > 0 {
		return fmt.Sprintf("%d writes (%d bytes) the database could not take are kept until it can: %v", n, bytes, cause)
	}
	if err := u.store.WriteFailure(); err != nil {
		return fmt.Sprintf("the database cannot take writes: %v", err)
	}
	return ""
}
