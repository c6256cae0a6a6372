package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/tablecopy"
)

// ErrNotEmpty: a copy's target store already holds rows.
var ErrNotEmpty = errors.New("target store is not empty")

// TableCopy is one table as Copy copied it: its rows, and a digest of
// them that both stores agreed on.
type TableCopy = tablecopy.TableCopy

// CopyOptions tune Copy.
type CopyOptions struct {
	// Replace empties a target that holds rows, instead of refusing it.
	// Only a PostgreSQL target can be emptied: a SQLite one is a file to
	// remove.
	Replace bool
}

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
	tables, err := tablecopy.InOrder(ctx, tablecopy.Snapshot{Src: src}, copyQueries(from.dialect), isClusterTable)
	if err != nil {
		return nil, fmt.Errorf("store: copy: tables of the source: %w", err)
	}
	copied := make([]TableCopy, len(tables))
	err = to.Write(ctx, func(tx *Tx) error {
		if err := tx.empty(ctx, tables, opts.Replace); err != nil {
			return err
		}
		for i, t := range tables {
			if copied[i], err = tablecopy.CopyTable(ctx, src, partTx{tx}, t); err != nil {
				return fmt.Errorf("store: copy table %s: %w", t.Name, err)
			}
		}
		if err := to.dialect.afterCopy(tx); err != nil {
			return err
		}
		return tablecopy.Check(ctx, partTx{tx}, tables, copied)
	})
	if err != nil {
		return nil, err
	}
	return copied, nil
}

// copyQueries are d's queries of its own schema, for a copy.
func copyQueries(d dialect) tablecopy.Queries {
	return tablecopy.Queries{Tables: d.tablesQuery(), References: d.referencesQuery(), Columns: d.columnsQuery()}
}

// empty makes sure the target's tables hold no rows: it empties them if
// replace, and fails with ErrNotEmpty otherwise.
func (t *Tx) empty(ctx context.Context, tables []tablecopy.Table, replace bool) error {
	var full []string
	for _, tb := range tables {
		var n int64
		if err := t.queryRow(`SELECT count(*) FROM ` + tb.Name).Scan(&n); err != nil {
			return fmt.Errorf("store: copy: count the target's %s: %w", tb.Name, err)
		}
		if n > 0 {
			full = append(full, fmt.Sprintf("%s (%d rows)", tb.Name, n))
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
		names[i] = tb.Name
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
