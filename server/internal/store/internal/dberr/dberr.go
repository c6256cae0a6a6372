// Package dberr tells the store's errors apart by whose they are: the
// database's own (a full disk, a lost connection: ErrUnavailable, the
// same write may succeed later) or the write's (a unique key repeated),
// on SQLite and on PostgreSQL alike. Their types tell the databases
// apart, so no dialect is needed.
package dberr

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Unavailable marks err, an error of the database rather than of the
// write, as one of ErrUnavailable, keeping its message.
func Unavailable(err error) error { return unavailableError{err} }

// ErrUnavailable is wrapped by the error of a write the database itself
// could not take (a full disk, an I/O error), as opposed to one refused
// for what it asked: the same write may succeed later.
var ErrUnavailable = errors.New("store unavailable")

// unavailableError is an error of the database, not of the write. Its
// message is the error's own.
type unavailableError struct{ err error }

func (e unavailableError) Error() string        { return e.err.Error() }
func (e unavailableError) Unwrap() error        { return e.err }
func (e unavailableError) Is(target error) bool { return target == ErrUnavailable }

// Classify marks err as the database's if SQLite or PostgreSQL says
// so: the codes of a database that cannot write now, whatever the write,
// and on PostgreSQL a connection lost or refused.
func Classify(err error) error {
	if err == nil {
		return nil // without the allocations of the checks below
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		if pgUnavailable(err) {
			return unavailableError{err}
		}
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_READONLY,
		sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return unavailableError{err}
	}
	return err
}

// Cause is the database's own error inside err, one of
// ErrUnavailable: its words (SQLite's "database or disk is full (13)",
// PostgreSQL's, or the connection's to it) name no row and no other write
// of the batch. For any other err it is err.
func Cause(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se
	}
	if cause, ok := pgCause(err); ok {
		return cause
	}
	return err
}

// pgUnavailable reports whether err is PostgreSQL, or the way to it,
// failing rather than the statement: a lost or refused connection, a
// server shutting down, a full disk, a conflict to retry. The same write
// may succeed later.
func pgUnavailable(err error) bool {
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return unavailableState(pe.Code)
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	return lostConn(err) != nil || pgconn.Timeout(err)
}

// lostConn is the error by which err says the connection to the database
// was lost, or nil.
func lostConn(err error) error {
	for _, lost := range []error{io.EOF, io.ErrUnexpectedEOF, driver.ErrBadConn, sql.ErrConnDone, pgconn.ErrConnClosed} {
		if errors.Is(err, lost) {
			return lost
		}
	}
	return nil
}

// unavailableState reports whether SQLSTATE code is the database's
// trouble rather than the statement's.
func unavailableState(code string) bool {
	switch code {
	case "55P03", // lock_not_available
		"55006", // object_in_use
		"25006": // read_only_sql_transaction: a standby, after a failover
		return true
	}
	switch code[:min(2, len(code))] {
	case "08", // connection exception
		"40", // transaction rollback: serialization failure, deadlock
		"53", // insufficient resources: disk full, out of memory, too many connections
		"57", // operator intervention: shutdown, cancelled
		"58", // system error: I/O
		"XX": // internal error, corrupted data
		return true
	}
	return false
}

// pgCause is PostgreSQL's own error inside err, one of ErrUnavailable, in
// words that name PostgreSQL and no row: the server's error, or the
// connection's.
func pgCause(err error) (error, bool) {
	if ce, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return fmt.Errorf("PostgreSQL: %w", ce), true
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return fmt.Errorf("PostgreSQL: %w", pe), true
	}
	if ne, ok := errors.AsType[net.Error](err); ok {
		return fmt.Errorf("PostgreSQL: connection lost: %w", ne), true
	}
	if lost := lostConn(err); lost != nil {
		return fmt.Errorf("PostgreSQL: connection lost: %w", lost), true
	}
	return nil, false
}

// pgUniqueViolated is UniqueViolated for PostgreSQL's error pe.
func pgUniqueViolated(pe *pgconn.PgError, table, column string) bool {
	return pe.Code == "23505" && pe.TableName == table && (column == "" || strings.HasPrefix(pe.Detail, "Key ("+column+")="))
}

// UniqueViolated reports whether err is the database refusing a row whose
// column (any, if column is "") of table repeats another row's, as a
// primary key or a UNIQUE constraint forbids.
func UniqueViolated(err error, table, column string) bool {
	if err == nil {
		return false
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pgUniqueViolated(pe, table, column)
	}
	if column != "" {
		return strings.Contains(err.Error(), "UNIQUE constraint failed: "+table+"."+column)
	}
	return strings.Contains(err.Error(), "UNIQUE constraint failed: "+table+".")
}
