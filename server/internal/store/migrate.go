package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/edgeaip/edgeaip/server/internal/store/schema"
)

// migrate brings the schema of db, in dialect d, up to date: it applies
// the migrations of package schema not applied yet, each once.
func migrate(ctx context.Context, db *sql.DB, d dialect) error {
	for {
		applied, err := migrateOnce(ctx, db, d)
		if err != nil || !applied {
			return err
		}
	}
}

// migrateOnce applies the next migration due, if any, in a transaction
// of its own, and reports whether it did.
func migrateOnce(ctx context.Context, db *sql.DB, d dialect) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	version, err := d.schemaVersion(ctx, tx)
	switch {
	case err != nil:
		return false, fmt.Errorf("read schema version: %w", err)
	case version > schema.Count():
		return false, fmt.Errorf("schema version %d is newer than this server (%d)", version, schema.Count())
	case version == schema.Count():
		return false, nil
	}
	if err := applyMigration(ctx, tx, d, version); err != nil {
		return false, fmt.Errorf("migration %d: %w", version+1, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %d: %w", version+1, err)
	}
	return true, nil
}

// applyMigration applies migration i, counted from 0, in tx.
func applyMigration(ctx context.Context, tx *sql.Tx, d dialect, i int) error {
	if _, err := tx.ExecContext(ctx, d.migration(i)); err != nil {
		return err
	}
	return d.setSchemaVersion(ctx, tx, i+1)
}
