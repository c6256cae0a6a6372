package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/store"
)

// Bounds on the writes kept for the store, by default; see
// StoreConfig.UnrecordedWrites and UnrecordedBytes.
const (
	defaultUnrecordedWrites = 10_000
	defaultUnrecordedBytes  = 64 << 20
)

// How long the first retry of kept writes waits, and the longest any
// waits: it doubles while the store refuses them.
const (
	retryUnrecordedFirst = 250 * time.Millisecond
	retryUnrecordedMax   = 5 * time.Second
)

// unrecorded keeps the writes the store could not take for its own
// reasons (store.ErrUnavailable: a full disk, say) and retries them, in
// the order they failed, until it takes them: a device's results, a
// command's failure, a task's start and end. Without it, a task whose end
// was not recorded stayed running, and results waited in the device's
// outbox until it happened to register again. It keeps at most maxWrites
// writes and maxBytes of what they record; past either, a write is
// dropped. They live in memory: see RATIONALE.md, "A full disk", for what
// a restart does with those still kept.
type unrecorded struct {
	store     *store.Store
	log       *slog.Logger
	maxWrites int
	maxBytes  int64
	dropped   func() // counts a dropped write

	mu    sync.Mutex
	queue []*keptWrite
	bytes int64
	keys  map[string]bool
	cause error // why the store refused the last write kept or retried

	wake chan struct{} // a write was kept
	stop chan struct{}
	done chan struct{} // closed when run returns
}

// keptWrite is a write to retry.
type keptWrite struct {
	what string // for the logs: "results of command X"
	// key, if set, keeps one write per key: the same results, sent again,
	// are kept once.
	key  string
	size int64 // about what it records, in bytes
	fn   func(*store.Tx) error
	// recorded, if set, is called once the store took fn (nil), or refused
	// it for what it asked (fn's error).
	recorded func(error)
}

func newUnrecorded(st *store.Store, cfg StoreConfig, dropped func(), log *slog.Logger) *unrecorded {
	u := &unrecorded{store: st, log: log, maxWrites: cfg.UnrecordedWrites, maxBytes: cfg.UnrecordedBytes, dropped: dropped,
		keys: map[string]bool{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go u.run()
	return u
}

// write runs w now and, if the store cannot take it, keeps it to retry.
// It returns the first attempt's error: one of store.ErrUnavailable means
// w is kept, or was dropped past the bounds (logged, and counted).
func (u *unrecorded) write(ctx context.Context, w keptWrite) error {
	err := u.store.Write(ctx, w.fn)
	if errors.Is(err, store.ErrUnavailable) {
		u.keep(w, err)
	}
	return err
}

// keep adds w, which the store refused with cause, to the writes to retry
// and reports whether it did: false if it is past the bounds, and is
// dropped.
func (u *unrecorded) keep(w keptWrite, cause error) bool {
	u.mu.Lock()
	u.cause = store.UnavailableCause(cause)
	switch {
	case w.key != "" && u.keys[w.key]:
		u.mu.Unlock()
		return true
	case len(u.queue) >= u.maxWrites || u.bytes+w.size > u.maxBytes:
		n, bytes := len(u.queue), u.bytes
		u.mu.Unlock()
		u.dropped()
		u.log.Error("write not recorded, and not kept: the server keeps no more", "write", w.what, "kept", n,
			"kept_bytes", bytes, "max", u.maxWrites, "max_bytes", u.maxBytes)
		return false
	}
	u.queue = append(u.queue, &w)
	u.bytes += w.size
	if w.key != "" {
		u.keys[w.key] = true
	}
	u.mu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
	return true
}

// hasRoom reports whether n more writes of bytes in all could be kept now.
func (u *unrecorded) hasRoom(n int, bytes int64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.queue)+n <= u.maxWrites && u.bytes+bytes <= u.maxBytes
}

// pending counts the kept writes and their bytes.
func (u *unrecorded) pending() (int, int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.queue), u.bytes
}

// run retries the kept writes until close, waiting longer each time the
// store refuses them. A write kept while a retry is due does not put it
// off: under a steady stream of refused writes, retries still come.
func (u *unrecorded) run() {
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
func (u *unrecorded) flush() bool {
	for {
		u.mu.Lock()
		if len(u.queue) == 0 {
			u.mu.Unlock()
			return true
		}
		w := u.queue[0]
		u.mu.Unlock()
		err := u.store.Write(context.Background(), w.fn)
		if errors.Is(err, store.ErrUnavailable) {
			u.mu.Lock()
			u.cause = store.UnavailableCause(err)
			u.mu.Unlock()
			return false
		}
		u.mu.Lock()
		u.queue = u.queue[1:]
		u.bytes -= w.size
		delete(u.keys, w.key)
		u.mu.Unlock()
		if err != nil {
			u.log.Warn("kept write refused by the store", "write", w.what, "err", err)
		} else {
			u.log.Info("kept write recorded", "write", w.what)
		}
		if w.recorded != nil {
			w.recorded(err)
		}
	}
}

// close stops the retries and tries the kept writes once more. What the
// store still cannot take is lost with the process: each write says what
// then happens (logged).
func (u *unrecorded) close() {
	close(u.stop)
	<-u.done
	if u.flush() {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, w := range u.queue {
		u.log.Error("kept write lost at shutdown: the store still cannot take it", "write", w.what)
	}
}

// health says why the store is not healthy, or "" if it is: writes are
// kept that it has not taken yet, or writes fail.
func (u *unrecorded) health() string {
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
