package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// ErrNotEmpty: a copy's target store already holds rows.
var ErrNotEmpty = errors.New("target store is not empty")

// TableCopy is one table as Copy copied it: its rows, and a digest of
// them that both stores agreed on.
type TableCopy struct {
	Table  string
	Rows   int64
	Digest string // hex; the same rows give the same digest on either database
}

// CopyOptions tune Copy.
type CopyOptions struct {
	// Replace empties a target that holds rows, instead of refusing it.
	// Only a PostgreSQL target can be emptied: a SQLite one is a file to
	// remove.
	Replace bool
}

// copyBatch is how many rows one INSERT of a copy carries.
const copyBatch = 200

// Copy copies every row of every table of from into to, in one
// transaction of to's, from one snapshot of from's, and commits it only
// if each table then holds on both sides as many rows, with the same
// digest. Both are
// stores this server opened, so their schemas are the same version. It
// fails with ErrNotEmpty if to holds rows, unless opts.Replace.
func Copy(ctx context.Context, from, to *Store, opts CopyOptions) ([]TableCopy, error) {
	src, err := from.rdb.BeginTx(ctx, from.dialect.snapshot())
	if err != nil {
		return nil, fmt.Errorf("store: copy: read the source: %w", err)
	}
	defer src.Rollback()
	tables, err := tablesInOrder(ctx, snapshotQuerier{src}, from.dialect)
	if err != nil {
		return nil, fmt.Errorf("store: copy: tables of the source: %w", err)
	}
	copied := make([]TableCopy, len(tables))
	err = to.Write(ctx, func(tx *Tx) error {
		if err := tx.empty(ctx, tables, opts.Replace); err != nil {
			return err
		}
		for i, t := range tables {
			if copied[i], err = tx.copyTable(ctx, src, from.dialect, t); err != nil {
				return fmt.Errorf("store: copy table %s: %w", t.name, err)
			}
		}
		if err := to.dialect.afterCopy(tx); err != nil {
			return err
		}
		return tx.checkCopy(ctx, tables, copied)
	})
	if err != nil {
		return nil, err
	}
	return copied, nil
}

// table is a table's name and columns.
type table struct {
	name    string
	columns []string
}

// columnList is the table's columns, quoted, for a SELECT or an INSERT.
func (tb table) columnList() string {
	return `"` + strings.Join(tb.columns, `", "`) + `"`
}

// querier is a transaction or a database to read from.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (rowIter, error)
}

// snapshotQuerier reads in src, a read transaction.
type snapshotQuerier struct{ src *sql.Tx }

func (q snapshotQuerier) QueryContext(ctx context.Context, query string, args ...any) (rowIter, error) {
	return q.src.QueryContext(ctx, query, args...)
}

// tablesInOrder lists the tables of the schema, each after those it
// references, with their columns.
func tablesInOrder(ctx context.Context, q querier, d dialect) ([]table, error) {
	names, err := strings1(ctx, q, d.tablesQuery())
	if err != nil {
		return nil, err
	}
	names = slices.DeleteFunc(names, isClusterTable)
	slices.Sort(names)
	refs := map[string][]string{}
	for _, n := range names {
		if refs[n], err = strings1(ctx, q, d.referencesQuery(), n); err != nil {
			return nil, fmt.Errorf("references of %s: %w", n, err)
		}
	}
	var out []table
	placed := map[string]bool{}
	var place func(n string, seen map[string]bool) error
	place = func(n string, seen map[string]bool) error {
		if placed[n] {
			return nil
		}
		if seen[n] {
			return fmt.Errorf("tables reference each other in a cycle through %s", n)
		}
		seen[n] = true
		for _, r := range refs[n] {
			if r != n {
				if err := place(r, seen); err != nil {
					return err
				}
			}
		}
		cols, err := strings1(ctx, q, d.columnsQuery(), n)
		if err != nil {
			return fmt.Errorf("columns of %s: %w", n, err)
		}
		placed[n] = true
		out = append(out, table{name: n, columns: cols})
		return nil
	}
	for _, n := range names {
		if err := place(n, map[string]bool{}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// strings1 runs a query of one text column and returns its values.
func strings1(ctx context.Context, q querier, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r rowScanner) (s string, err error) { return s, r.Scan(&s) }, nil)
}

// empty makes sure the target's tables hold no rows: it empties them if
// replace, and fails with ErrNotEmpty otherwise.
func (t *Tx) empty(ctx context.Context, tables []table, replace bool) error {
	var full []string
	for _, tb := range tables {
		var n int64
		if err := t.queryRow(`SELECT count(*) FROM ` + tb.name).Scan(&n); err != nil {
			return fmt.Errorf("store: copy: count the target's %s: %w", tb.name, err)
		}
		if n > 0 {
			full = append(full, fmt.Sprintf("%s (%d rows)", tb.name, n))
		}
	}
	if len(full) == 0 {
		return nil
	}
	if !replace {
		return fmt.Errorf("store: copy: %w: %s", ErrNotEmpty, strings.Join(full, ", "))
	}
	names := make([]string, len(tables))
	for i, tb := range tables {
		names[i] = tb.name
	}
	q, err := t.s.dialect.emptyTables(names)
	if err != nil {
		return fmt.Errorf("store: copy: %w", err)
	}
	if _, err := t.exec(q); err != nil {
		return fmt.Errorf("store: copy: empty the target: %w", err)
	}
	return nil
}

// copyTable copies the rows of tb from src, a snapshot of a store in
// dialect d, and returns their count and digest.
func (t *Tx) copyTable(ctx context.Context, src *sql.Tx, d dialect, tb table) (TableCopy, error) {
	rows, err := src.QueryContext(ctx, `SELECT `+tb.columnList()+` FROM `+tb.name)
	if err != nil {
		return TableCopy{}, fmt.Errorf("read: %w", err)
	}
	defer rows.Close()
	var (
		sum   rowSum
		n     int64
		batch []any
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := t.exec(insertRows(tb, len(batch)/len(tb.columns)), batch...)
		batch = batch[:0]
		return err
	}
	for rows.Next() {
		vals, err := scanRow(rows, len(tb.columns))
		if err != nil {
			return TableCopy{}, fmt.Errorf("read: %w", err)
		}
		sum.add(tb.columns, vals)
		n++
		batch = append(batch, vals...)
		if len(batch) >= copyBatch*len(tb.columns) {
			if err := flush(); err != nil {
				return TableCopy{}, fmt.Errorf("write: %w", err)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return TableCopy{}, fmt.Errorf("read: %w", err)
	}
	if err := flush(); err != nil {
		return TableCopy{}, fmt.Errorf("write: %w", err)
	}
	return TableCopy{Table: tb.name, Rows: n, Digest: sum.hex()}, nil
}

// insertRows is the INSERT of n rows into tb.
func insertRows(tb table, n int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(tb.columns)), ", ") + ")"
	return `INSERT INTO ` + tb.name + ` (` + tb.columnList() + `) VALUES ` +
		strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

func scanRow(rows rowScanner, n int) ([]any, error) {
	vals := make([]any, n)
	ptrs := make([]any, n)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	return vals, nil
}

// checkCopy reads back what a copy wrote, before it commits, and
// compares each table's count and digest with the source's.
func (t *Tx) checkCopy(ctx context.Context, tables []table, copied []TableCopy) error {
	var bad []string
	for i, tb := range tables {
		got, err := digestTable(ctx, txQuerier{t}, tb)
		if err != nil {
			return fmt.Errorf("store: copy: check the target's %s: %w", tb.name, err)
		}
		if want := copied[i]; got != want {
			bad = append(bad, fmt.Sprintf("%s: %d rows, digest %s, where the source has %d rows, digest %s",
				tb.name, got.Rows, got.Digest, want.Rows, want.Digest))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("store: copy: the target would differ from the source, so nothing is copied: %s", strings.Join(bad, "; "))
	}
	return nil
}

// txQuerier reads in a write's transaction.
type txQuerier struct{ t *Tx }

func (q txQuerier) QueryContext(_ context.Context, query string, args ...any) (rowIter, error) {
	return q.t.query(query, args...)
}

// digestTable counts and digests the rows of tb.
func digestTable(ctx context.Context, q querier, tb table) (TableCopy, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+tb.columnList()+` FROM `+tb.name)
	if err != nil {
		return TableCopy{}, err
	}
	defer rows.Close()
	var (
		sum rowSum
		n   int64
	)
	for rows.Next() {
		vals, err := scanRow(rows, len(tb.columns))
		if err != nil {
			return TableCopy{}, err
		}
		sum.add(tb.columns, vals)
		n++
	}
	return TableCopy{Table: tb.name, Rows: n, Digest: sum.hex()}, rows.Err()
}

// rowSum digests a table's rows in any order: the sum, modulo 2²⁵⁶, of
// each row's SHA-256 over its columns' names and values, each value
// written by its kind (NULL, integer, real, text) so that the same rows
// digest the same on either database. Rows are unique by their key, so a
// sum loses none.
type rowSum [4]uint64

func (s *rowSum) add(columns []string, vals []any) {
	h := sha256.New()
	for i, v := range vals {
		h.Write([]byte(columns[i]))
		h.Write([]byte{0})
		var enc string
		switch v := v.(type) {
		case nil:
			enc = "n"
		case int64:
			enc = "i" + strconv.FormatInt(v, 10)
		case float64:
			enc = "f" + strconv.FormatFloat(v, 'g', -1, 64)
		case string:
			enc = "t" + v
		case []byte:
			enc = "t" + string(v)
		default:
			enc = fmt.Sprintf("?%T %v", v, v)
		}
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(enc)))
		h.Write(n[:])
		h.Write([]byte(enc))
	}
	d := h.Sum(nil)
	var carry uint64
	for i := 3; i >= 0; i-- {
		s[i], carry = bits.Add64(s[i], binary.BigEndian.Uint64(d[i*8:]), carry)
	}
}

func (s *rowSum) hex() string {
	var b [32]byte
	for i, x := range s {
		binary.BigEndian.PutUint64(b[i*8:], x)
	}
	return hex.EncodeToString(b[:])
}
