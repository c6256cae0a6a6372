package store

import (
	"context"
	"errors"
	"fmt"
)

// begin opens a batch's transaction on the writer's connection. A
// connection that broke since the last batch (a PostgreSQL server that
// restarted, a network that dropped it) fails the first statement sent
// on it: it is then replaced, with the statements prepared on it, and
// the transaction begun on the new one. Nothing was written on the old.
func (s *Store) begin(tx *Tx, synced bool) error {
	err := s.dialect.begin(tx, synced)
	if !errors.Is(err, ErrUnavailable) || s.conn.PingContext(context.Background()) == nil {
		return err
	}
	if rerr := s.reconnect(); rerr != nil {
		return errors.Join(err, rerr)
	}
	return s.dialect.begin(tx, synced)
}

// reconnect replaces the writer's broken connection with a new one, or
// keeps it, closed, if none can be had within reconnectTimeout: the next
// batch tries again.
func (s *Store) reconnect() error {
	for q, st := range s.stmts {
		st.Close() // of the broken connection: its error says only that
		delete(s.stmts, q)
	}
	s.conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), reconnectTimeout)
	defer cancel()
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return unavailableError{fmt.Errorf("store: reconnect the writer: %w", err)}
	}
	s.conn = conn
	s.synced = true // a new connection has the settings it was opened with
	return nil
}
