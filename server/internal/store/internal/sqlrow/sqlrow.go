// Package sqlrow holds what every part of the store that reads or writes
// rows shares, whether through database/sql (the readers) or the driver
// (the writer): the shape of a row and of rows, scanning all of them,
// ErrNotFound and ErrExists, and how the store writes times, optional
// text and lists.
package sqlrow

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrNotFound is wrapped by the error of a lookup of one row that found
// none.
var ErrNotFound = errors.New("not found")

// ErrExists is wrapped by the error of a write of a row whose key another
// row has.
var ErrExists = errors.New("already exists")

// Row is a single row to scan: *sql.Row, the first of a writer's query,
// or the error of preparing its query.
type Row interface{ Scan(...any) error }

// Rows are rows to scan one by one: *sql.Rows, or a query's of the
// writer's.
type Rows interface {
	Row
	Next() bool
	Err() error
	Close() error
}

// Writer is a write's transaction as the parts of the store in packages
// of their own write in it.
type Writer interface {
	// Exec runs a statement in the write's transaction.
	Exec(query string, args ...any) (sql.Result, error)
	// Query runs a query in the write's transaction.
	Query(query string, args ...any) (Rows, error)
	// QueryRow runs a query of one row in the write's transaction.
	QueryRow(query string, args ...any) Row
}

// Reader is the store's readers as the parts of the store in packages of
// their own read from them.
type Reader interface {
	// ReadRow runs a query of one row on the store's readers.
	ReadRow(ctx context.Context, query string, args ...any) Row
	// ReadRows runs a query on the store's readers.
	ReadRows(ctx context.Context, query string, args ...any) (Rows, error)
}

// Collect scans every row of rows with scan, appending to out, and closes
// rows.
func Collect[T any](rows Rows, scan func(Row) (T, error), out []T) ([]T, error) {
	defer rows.Close()
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Err is err from a lookup of one row, named by format and args: nil
// stays nil, and no row is ErrNotFound.
func Err(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	return fmt.Errorf("store: "+format+": %w", append(args, err)...)
}

// Now is the time now as the store writes it.
func Now() string { return FormatTime(time.Now()) }

// timeLayout is how the store writes times: UTC with all nine digits of
// the fraction, so that comparing the text, as ORDER BY and < do, is
// comparing the times. time.RFC3339Nano drops trailing zeros, which put
// "05.1Z" after "05.10000001Z"; rows written that way before migration 4
// are rewritten by it, and time.RFC3339Nano still parses both.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// FormatTime is t as the store writes it.
func FormatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// ParseTime is the time the store wrote as s; NULL is the zero time.
func ParseTime(s sql.NullString) time.Time {
	if !s.Valid {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, s.String)
	return t
}

// NullString is s, or NULL if s is empty.
func NullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// NullTime is t as the store writes it, or NULL if t is zero.
func NullTime(t time.Time) sql.NullString {
	if t.IsZero() {
		return sql.NullString{}
	}
	return NullString(FormatTime(t))
}

// List is s, or an empty list if s is nil: JSON's [] rather than null.
func List(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ErrBadCursor is a listing's cursor that this server did not give.
var ErrBadCursor = errors.New("not a cursor this server gave")

// Cursor is the opaque cursor of a listing's page that starts after the
// row created at at, with id id.
func Cursor(at time.Time, id string) string {
	b, _ := json.Marshal([]string{at.UTC().Format(time.RFC3339Nano), id})
	return base64.RawURLEncoding.EncodeToString(b)
}

// ReadCursor reads a cursor Cursor made; anything else is ErrBadCursor.
func ReadCursor(cursor string) (at time.Time, id string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	var key []string
	if err != nil || json.Unmarshal(b, &key) != nil || len(key) != 2 {
		return time.Time{}, "", ErrBadCursor
	}
	if at, err = time.Parse(time.RFC3339Nano, key[0]); err != nil {
		return time.Time{}, "", ErrBadCursor
	}
	return at, key[1], nil
}
