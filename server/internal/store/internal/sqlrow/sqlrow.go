// Package sqlrow holds what every part of the store that reads rows
// shares, whether it reads them through database/sql (the readers) or
// from the driver (the writer): the shape of a row and of rows, scanning
// all of them, and turning "no row" into ErrNotFound.
package sqlrow

import (
	"database/sql"
	"errors"
	"fmt"
)

// ErrNotFound is wrapped by the error of a lookup of one row that found
// none.
var ErrNotFound = errors.New("not found")

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
