// Package tablecopy copies a store's tables, row by row, from one
// database to another (aip-server store copy), and digests them so that
// both sides can be compared before the copy commits. It knows tables
// and rows, not the store: the store hands it a snapshot to read, the
// write to copy into and its dialect's queries.
package tablecopy

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// targetQuerier reads in a copy's target.
type targetQuerier struct{ t sqlrow.Writer }

// QueryContext runs query in the target's transaction.
func (q targetQuerier) QueryContext(_ context.Context, query string, args ...any) (sqlrow.Rows, error) {
	return q.t.Query(query, args...)
}

// Queries are a database's queries of its own schema.
type Queries struct {
	// Tables lists the store's tables, without the schema version's.
	Tables string
	// References lists the tables the table $1 references.
	References string
	// Columns lists the columns of the table $1, in order.
	Columns string
}

// TableCopy is one table as a copy copied it: its rows, and a digest of
// them that both stores agreed on.
type TableCopy struct {
	Table  string
	Rows   int64
	Digest string // hex; the same rows give the same digest on either database
}

// copyBatch is how many rows one INSERT of a copy carries.
const copyBatch = 200

// Table is a table's name and columns.
type Table struct {
	Name    string
	Columns []string
}

// columnList is the table's columns, quoted, for a SELECT or an INSERT.
func (tb Table) columnList() string {
	return `"` + strings.Join(tb.Columns, `", "`) + `"`
}

// Querier is a transaction or a database to read from.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (sqlrow.Rows, error)
}

// Snapshot reads in Src, a read transaction.
type Snapshot struct{ Src *sql.Tx }

// QueryContext runs query in the snapshot.
func (q Snapshot) QueryContext(ctx context.Context, query string, args ...any) (sqlrow.Rows, error) {
	return q.Src.QueryContext(ctx, query, args...)
}

// InOrder lists the tables of the schema, each after those it
// references, with their columns, but those skip says to leave.
func InOrder(ctx context.Context, q Querier, d Queries, skip func(table string) bool) ([]Table, error) {
	names, err := strings1(ctx, q, d.Tables)
	if err != nil {
		return nil, err
	}
	names = slices.DeleteFunc(names, skip)
	slices.Sort(names)
	refs := map[string][]string{}
	for _, n := range names {
		if refs[n], err = strings1(ctx, q, d.References, n); err != nil {
			return nil, fmt.Errorf("references of %s: %w", n, err)
		}
	}
	var out []Table
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
		cols, err := strings1(ctx, q, d.Columns, n)
		if err != nil {
			return fmt.Errorf("columns of %s: %w", n, err)
		}
		placed[n] = true
		out = append(out, Table{Name: n, Columns: cols})
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
func strings1(ctx context.Context, q Querier, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// CopyTable copies the rows of tb from src, a snapshot of a store, into
// t, and returns their count and digest.
func CopyTable(ctx context.Context, src *sql.Tx, t sqlrow.Writer, tb Table) (TableCopy, error) {
	rows, err := src.QueryContext(ctx, `SELECT `+tb.columnList()+` FROM `+tb.Name)
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
		_, err := t.Exec(insertRows(tb, len(batch)/len(tb.Columns)), batch...)
		batch = batch[:0]
		return err
	}
	for rows.Next() {
		vals, err := scanRow(rows, len(tb.Columns))
		if err != nil {
			return TableCopy{}, fmt.Errorf("read: %w", err)
		}
		sum.add(tb.Columns, vals)
		n++
		batch = append(batch, vals...)
		if len(batch) >= copyBatch*len(tb.Columns) {
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
	return TableCopy{Table: tb.Name, Rows: n, Digest: sum.hex()}, nil
}

// insertRows is the INSERT of n rows into tb.
func insertRows(tb Table, n int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(tb.Columns)), ", ") + ")"
	return `INSERT INTO ` + tb.Name + ` (` + tb.columnList() + `) VALUES ` +
		strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

func scanRow(rows sqlrow.Row, n int) ([]any, error) {
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

// Check reads back what a copy wrote into t, before it commits, and
// compares each table's count and digest with the source's.
func Check(ctx context.Context, t sqlrow.Writer, tables []Table, copied []TableCopy) error {
	var bad []string
	for i, tb := range tables {
		got, err := Digest(ctx, targetQuerier{t}, tb)
		if err != nil {
			return fmt.Errorf("store: copy: check the target's %s: %w", tb.Name, err)
		}
		if want := copied[i]; got != want {
			bad = append(bad, fmt.Sprintf("%s: %d rows, digest %s, where the source has %d rows, digest %s",
				tb.Name, got.Rows, got.Digest, want.Rows, want.Digest))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("store: copy: the target would differ from the source, so nothing is copied: %s", strings.Join(bad, "; "))
	}
	return nil
}

// Digest counts and digests the rows of tb.
func Digest(ctx context.Context, q Querier, tb Table) (TableCopy, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+tb.columnList()+` FROM `+tb.Name)
	if err != nil {
		return TableCopy{}, err
	}
	defer rows.Close()
	var (
		sum rowSum
		n   int64
	)
	for rows.Next() {
		vals, err := scanRow(rows, len(tb.Columns))
		if err != nil {
			return TableCopy{}, err
		}
		sum.add(tb.Columns, vals)
		n++
	}
	return TableCopy{Table: tb.Name, Rows: n, Digest: sum.hex()}, rows.Err()
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
