package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/driverstmt"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/dberr"
)

// inTx begins a batch's transaction on the writer's connection and runs
// fn in it. The writer's statements go to the driver's connection, which
// sql.Conn.Raw lends for the batch (see RATIONALE.md, "The writer drives
// the driver"). A connection that broke since the last batch (a
// PostgreSQL server that restarted, a network that dropped it) fails the
// first statement sent on it: it is then replaced, with the statements
// prepared on it, and the transaction begun on the new one. Nothing was
// written on the old.
func (s *Store) inTx(synced bool, fn func(*Tx)) error {
	broken, err := s.onConn(synced, fn)
	if !broken {
		return err
	}
	if rerr := s.reconnect(); rerr != nil {
		return errors.Join(err, rerr)
	}
	_, err = s.onConn(synced, fn)
	return err
}

// onConn begins the transaction on the driver's connection and, if that
// succeeds, runs fn in it, all before Raw returns: the driver's
// connection is not to be used after. It reports whether BEGIN failed on
// a broken connection, or on one closed (a reconnect that failed leaves
// it so).
func (s *Store) onConn(synced bool, fn func(*Tx)) (broken bool, err error) {
	rawErr := s.conn.Raw(func(dc any) error {
		c, cerr := driverstmt.AsConn(dc)
		if cerr != nil {
			err = cerr
			return nil
		}
		tx := &Tx{s: s, c: c, pipe: s.dialect.pipeline(c)}
		if err = s.dialect.begin(tx, synced); err != nil {
			broken = errors.Is(err, ErrUnavailable) && !driverstmt.Alive(c)
			return nil
		}
		fn(tx)
		return nil
	})
	if rawErr != nil {
		return true, dberr.Unavailable(fmt.Errorf("store: the writer's connection: %w", rawErr))
	}
	return broken, err
}

// betweenBatches runs fn on the writer's connection outside any
// transaction, as the writer's checkpoint does between two batches; it
// fails if the connection is closed (a reconnect that failed leaves it
// so).
func (s *Store) betweenBatches(fn func(*Tx)) error {
	return s.conn.Raw(func(dc any) error {
		c, err := driverstmt.AsConn(dc)
		if err != nil {
			return err
		}
		fn(&Tx{s: s, c: c})
		return nil
	})
}

// reconnect replaces the writer's broken connection with a new one, or
// keeps it, closed, if none can be had within reconnectTimeout: the next
// batch tries again.
func (s *Store) reconnect() error {
	s.closeStmts() // of the broken connection: its error says only that
	s.conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), reconnectTimeout)
	defer cancel()
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return dberr.Unavailable(fmt.Errorf("store: reconnect the writer: %w", err))
	}
	s.conn = conn
	s.synced = true // a new connection has the settings it was opened with
	return nil
}

// closeStmts closes the writer's prepared statements, on the driver's
// connection they were prepared on, which must still be open: database/sql
// knows nothing of them. A closed connection (a reconnect that failed
// leaves it so) has none left to close.
func (s *Store) closeStmts() error {
	var err error
	s.conn.Raw(func(any) error {
		for _, st := range s.stmts {
			err = errors.Join(err, st.Close())
		}
		return nil
	})
	clear(s.stmts)
	clear(s.pgStmts) // the connection's: closing it closes them
	return err
}
