package store

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

// writerStmt is a statement prepared on the writer's driver connection.
type writerStmt struct {
	driver.Stmt
	exec   driver.StmtExecContext
	query  driver.StmtQueryContext
	inputs int // its placeholders, or -1 if the driver does not say
}

// prepare prepares query on the driver's connection c.
func prepare(c writerConn, query string) (*writerStmt, error) {
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
	return &writerStmt{Stmt: ds, exec: exec, query: q, inputs: ds.NumInput()}, nil
}

// namedValues converts a statement's arguments into the driver's values
// as database/sql does (driverArgsConnLocked): through the connection's
// NamedValueChecker if it has one (pgx's, which takes every value as it
// is), else database/sql's default conversion, which calls a
// driver.Valuer (sql.NullString) and widens integers to int64. The values
// go into the writer's buffer, reused by the next statement: the drivers
// bind them before they return.
func (s *Store) namedValues(c writerConn, st *writerStmt, args []any) ([]driver.NamedValue, error) {
	args = s.dialect.args(args)
	if st.inputs >= 0 && len(args) != st.inputs {
		return nil, fmt.Errorf("store: expected %d arguments, got %d", st.inputs, len(args))
	}
	check, _ := c.(driver.NamedValueChecker)
	nv := s.args[:0]
	for i, a := range args {
		nv = append(nv, driver.NamedValue{Ordinal: i + 1, Value: a})
		// In place: a value of its own would escape to the heap.
		if err := checkValue(check, &nv[i]); err != nil {
			return nil, fmt.Errorf("store: converting argument $%d (%T): %w", i+1, a, err)
		}
	}
	s.args = nv
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

// writerRows are the rows of a query of the writer's, read from the
// driver. Its methods are those of *sql.Rows the store uses.
type writerRows struct {
	rows   driver.Rows
	cols   []string
	vals   []driver.Value
	err    error
	closed bool
}

func newWriterRows(r driver.Rows) *writerRows {
	cols := r.Columns()
	return &writerRows{rows: r, cols: cols, vals: make([]driver.Value, len(cols))}
}

// Next reads the next row, reporting whether there is one; rows end
// closed.
func (r *writerRows) Next() bool {
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
func (r *writerRows) Scan(dest ...any) error {
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
func (r *writerRows) Err() error { return r.err }

// Close ends the rows; it may be called again.
func (r *writerRows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	return r.rows.Close()
}

// firstRow is the first row of a query of the writer's.
type firstRow struct{ rows *writerRows }

// Scan scans the first row into dest as (*sql.Row).Scan does: no row is
// sql.ErrNoRows. Errors that are the database's say so.
func (r firstRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return unavailable(err)
		}
		return sql.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return unavailable(err)
	}
	return unavailable(r.rows.Close())
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
// kind it scans (a TokenKind is a string), as convertAssign's reflection
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
