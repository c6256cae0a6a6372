// Package driverstmt runs statements on a database/sql driver's own
// connection, without database/sql: prepared statements, their arguments
// converted and their rows scanned as database/sql would. The store's
// writer uses it on the connection sql.Conn.Raw lends it for a batch,
// where database/sql's own per-statement work cost more than the rest of
// a small write (see the store's RATIONALE.md, "The writer drives the
// driver").
package driverstmt

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"
)

// AsConn is the driver's connection dc as the writer uses it.
func AsConn(dc any) (Conn, error) {
	c, ok := dc.(Conn)
	if !ok {
		return nil, fmt.Errorf("store: the driver's connection (%T) takes no context", dc)
	}
	return c, nil
}

// Conn is what the writer needs of a driver's connection; both
// modernc.org/sqlite's and pgx's stdlib.Conn have it.
type Conn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ExecerContext
}

// Alive reports whether the driver's connection c answers, as
// sql.Conn.PingContext would find.
func Alive(c Conn) bool {
	p, ok := c.(driver.Pinger)
	return !ok || p.Ping(context.Background()) == nil
}

// Stmt is a statement prepared on the writer's driver connection.
type Stmt struct {
	driver.Stmt
	// Execer and Queryer are the statement's context-taking methods.
	Execer  driver.StmtExecContext
	Queryer driver.StmtQueryContext
	inputs  int // its placeholders, or -1 if the driver does not say
}

// Prepare prepares query on the driver's connection c.
func Prepare(c Conn, query string) (*Stmt, error) {
	ds, err := c.PrepareContext(context.Background(), query)
	if err != nil {
		return nil, err
	}
	exec, eok := ds.(driver.StmtExecContext)
	q, qok := ds.(driver.StmtQueryContext)
	if !eok || !qok {
		ds.Close()
		return nil, fmt.Errorf("the driver's statement (%T) takes no context", ds)
	}
	return &Stmt{Stmt: ds, Execer: exec, Queryer: q, inputs: ds.NumInput()}, nil
}

// NamedValues converts a statement's arguments into the driver's values
// as database/sql does (driverArgsConnLocked): through the connection's
// NamedValueChecker if it has one (pgx's, which takes every value as it
// is), else database/sql's default conversion, which calls a
// driver.Valuer (sql.NullString) and widens integers to int64. The values
// go into buf, reused, which it returns: the drivers bind them before
// they return.
func NamedValues(buf []driver.NamedValue, c Conn, st *Stmt, args []any) ([]driver.NamedValue, error) {
	if st.inputs >= 0 && len(args) != st.inputs {
		return buf, fmt.Errorf("store: expected %d arguments, got %d", st.inputs, len(args))
	}
	check, _ := c.(driver.NamedValueChecker)
	nv := buf[:0]
	for i, a := range args {
		nv = append(nv, driver.NamedValue{Ordinal: i + 1, Value: a})
		// In place: a value of its own would escape to the heap.
		if err := checkValue(check, &nv[i]); err != nil {
			return nv, fmt.Errorf("store: converting argument $%d (%T): %w", i+1, a, err)
		}
	}
	return nv, nil
}

// checkValue converts v with check, or database/sql's default conversion
// if check is nil or skips it.
func checkValue(check driver.NamedValueChecker, v *driver.NamedValue) error {
	if check != nil {
		if err := check.CheckNamedValue(v); !errors.Is(err, driver.ErrSkip) {
			return err
		}
	}
	var err error
	v.Value, err = driver.DefaultParameterConverter.ConvertValue(v.Value)
	return err
}

// Rows are the rows of a query of the writer's, read from the
// driver. Its methods are those of *sql.Rows the store uses.
type Rows struct {
	rows   driver.Rows
	cols   []string
	vals   []driver.Value
	err    error
	closed bool
}

// NewRows reads r, a query's rows from the driver.
func NewRows(r driver.Rows) *Rows {
	cols := r.Columns()
	return &Rows{rows: r, cols: cols, vals: make([]driver.Value, len(cols))}
}

// Next reads the next row, reporting whether there is one; rows end
// closed.
func (r *Rows) Next() bool {
	if r.closed {
		return false
	}
	r.err = r.rows.Next(r.vals)
	if r.err == nil {
		return true
	}
	if r.err == io.EOF {
		r.err = nil
	}
	r.Close()
	return false
}

// Scan copies the current row's columns into dest, converting them as
// (*sql.Rows).Scan does.
func (r *Rows) Scan(dest ...any) error {
	if r.closed {
		return errors.New("store: scan of rows closed")
	}
	if len(dest) != len(r.vals) {
		return fmt.Errorf("store: expected %d destination arguments in Scan, not %d", len(r.vals), len(dest))
	}
	for i, d := range dest {
		if err := scanValue(d, r.vals[i]); err != nil {
			return fmt.Errorf("store: scan error on column index %d, name %q: %w", i, r.cols[i], err)
		}
	}
	return nil
}

// Err is the error that ended the rows early, if any.
func (r *Rows) Err() error { return r.err }

// Close ends the rows; it may be called again.
func (r *Rows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	return r.rows.Close()
}

// scanValue stores the driver's value src in dest as database/sql's
// convertAssign does, through sql.Null's Scan, which calls it, for each
// type the store scans into; a NULL goes only into a *any, a *[]byte or
// a sql.Scanner.
func scanValue(dest any, src driver.Value) error {
	switch d := dest.(type) {
	case sql.Scanner:
		return d.Scan(src)
	case *any:
		return assign(d, src)
	case *[]byte:
		if src == nil {
			*d = nil
			return nil
		}
		return assign(d, src)
	case *string:
		return assign(d, src)
	case *int:
		return assign(d, src)
	case *int64:
		return assign(d, src)
	case *float64:
		return assign(d, src)
	case *bool:
		return assign(d, src)
	case *time.Time:
		return assign(d, src)
	}
	return scanKind(dest, src)
}

// scanKind is scanValue for a pointer to a type of the store's own of a
// kind it scans (the store's TokenKind is a string), as convertAssign's reflection
// does.
func scanKind(dest any, src driver.Value) error {
	v := reflect.ValueOf(dest)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("store: scanning into %T is not supported", dest)
	}
	e := v.Elem()
	switch e.Kind() {
	case reflect.String:
		var s string
		err := assign(&s, src)
		e.SetString(s)
		return err
	case reflect.Int, reflect.Int64:
		var n int64
		err := assign(&n, src)
		e.SetInt(n)
		return err
	case reflect.Bool:
		var b bool
		err := assign(&b, src)
		e.SetBool(b)
		return err
	}
	return fmt.Errorf("store: scanning into %T is not supported", dest)
}

// assign is scanValue for a dest of type *T.
func assign[T any](dest *T, src driver.Value) error {
	var n sql.Null[T]
	if err := n.Scan(src); err != nil {
		return err
	}
	if !n.Valid {
		if _, ok := any(dest).(*any); !ok {
			return fmt.Errorf("converting NULL to %T is unsupported", *dest)
		}
	}
	*dest = n.V
	return nil
}
