package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/edgeaip/edgeaip/internal/atomicfile"
)

// Backup writes a consistent copy of the SQLite database at path to the
// new file to, while a server goes on writing the database: VACUUM INTO
// reads one snapshot of it. The copy is written beside to and renamed to
// it once it is complete and on disk, so that to is never half a copy. A
// server whose data dir holds the copy as its database serves what the
// store held. (A PostgreSQL store is backed up with pg_dump.)
func Backup(ctx context.Context, path, to string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("store: back up: %w", err)
	}
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("store: back up to %s: it exists", to)
	}
	tmp, err := os.CreateTemp(filepath.Dir(to), filepath.Base(to)+".partial-*")
	if err != nil {
		return fmt.Errorf("store: back up: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	// Not query_only, which refuses VACUUM INTO: it writes only to.
	db, err := openDB(path)
	if err != nil {
		return err
	}
	defer db.Close()
	// VACUUM INTO wants a file that does not exist or is empty.
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmp.Name()); err != nil {
		return fmt.Errorf("store: back up %s: %w", path, err)
	}
	if err := syncFile(tmp.Name()); err != nil {
		return fmt.Errorf("store: back up: %w", err)
	}
	if err := os.Rename(tmp.Name(), to); err != nil {
		return fmt.Errorf("store: back up: %w", err)
	}
	return atomicfile.SyncDir(filepath.Dir(to))
}

// syncFile flushes the file at path to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
