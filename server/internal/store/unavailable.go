package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/dberr"
)

// ErrUnavailable is wrapped by the error of a write the database itself
// could not take (a full disk, an I/O error), as opposed to one refused
// for what it asked: the same write may succeed later.
var ErrUnavailable = dberr.ErrUnavailable

// unavailable marks err as the database's if SQLite or PostgreSQL says
// so (dberr.Classify).
func unavailable(err error) error { return dberr.Classify(err) }

// UnavailableCause is the database's own error inside err, one of
// ErrUnavailable: its words (SQLite's "database or disk is full (13)",
// PostgreSQL's, or the connection's to it) name no row and no other write
// of the batch. For any other err it is err.
func UnavailableCause(err error) error { return dberr.Cause(err) }

// failing is whether the latest writes failed for the database's own
// reasons, and how many writes have since Open.
type failing struct {
	mu    sync.Mutex
	cause error // the database's error (SQLite's words), or nil
	count atomic.Uint64
}

// note records how a commit's writes ended: failed writes that were the
// database's are counted and their cause kept; a commit that took a write
// clears it.
func (f *failing) note(errs []error) {
	var cause error
	took := false
	for _, err := range errs {
		if errors.Is(err, ErrUnavailable) {
			f.count.Add(1)
			cause = UnavailableCause(err)
		}
		took = took || err == nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case cause != nil:
		f.cause = cause
	case took:
		f.cause = nil
	}
}

// WriteFailure is the database's error for the latest write it could
// not take, or nil if none failed so since a write last succeeded.
func (s *Store) WriteFailure() error {
	s.failing.mu.Lock()
	defer s.failing.mu.Unlock()
	return s.failing.cause
}

// WriteFailures counts the writes that failed with ErrUnavailable since
// Open.
func (s *Store) WriteFailures() uint64 { return s.failing.count.Load() }

// SetMaxPages bounds the database to n pages (PRAGMA max_page_count),
// or, with n = 0, to the pages it has now: a write that needs more fails
// with SQLITE_FULL, as on a full disk. Tests fill the store with it. On
// PostgreSQL it fails: there a test stops the server instead.
func (s *Store) SetMaxPages(ctx context.Context, n int64) error {
	return s.Write(ctx, func(tx *Tx) error {
		if n == 0 {
			if err := tx.queryRow(`PRAGMA page_count`).Scan(&n); err != nil {
				return fmt.Errorf("store: page count: %w", err)
			}
		}
		// Not through tx.exec: a PRAGMA takes no parameters, and each n
		// would be a statement kept prepared.
		if err := tx.controlOnce(fmt.Sprintf(`PRAGMA max_page_count = %d`, n)); err != nil {
			return fmt.Errorf("store: max page count %d: %w", n, err)
		}
		return nil
	})
}
