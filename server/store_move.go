package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/edgeaip/edgeaip/internal/dirlock"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// TableCopy is one table as CopyStore copied it: its rows, and the digest
// of them both stores agreed on.
type TableCopy = store.TableCopy

// CopyStore copies every row of the store at from into the store at to,
// each a data dir (its SQLite database) or a postgres:// URL: a single
// node's fleet moves into a PostgreSQL store, or back out. Each table is
// checked on both sides by its count of rows and a digest of them before
// the copy commits. A target that holds rows is refused, unless replace
// (a PostgreSQL target is emptied first). A data dir is held locked
// throughout, as a running server holds it: a server must not be writing
// the store being copied, or the copy would miss what it writes next.
func CopyStore(ctx context.Context, from, to string, replace bool) ([]TableCopy, error) {
	src, release, err := openForCopy(ctx, from, false)
	if err != nil {
		return nil, fmt.Errorf("copy from %s: %w", store.RedactURL(from), err)
	}
	defer release()
	dst, releaseDst, err := openForCopy(ctx, to, true)
	if err != nil {
		return nil, fmt.Errorf("copy to %s: %w", store.RedactURL(to), err)
	}
	defer releaseDst()
	return store.Copy(ctx, src, dst, store.CopyOptions{Replace: replace})
}

// openForCopy opens the store at location, a URL or a data dir, which it
// locks; a data dir is created if create, and must hold a database
// otherwise. release closes the store and unlocks the dir.
func openForCopy(ctx context.Context, location string, create bool) (st *store.Store, release func(), err error) {
	if store.IsPostgresURL(location) {
		st, err := store.Open(ctx, location, store.Options{})
		if err != nil {
			return nil, nil, err
		}
		return st, func() { st.Close() }, nil
	}
	db := filepath.Join(location, DatabaseFile)
	if create {
		if err := os.MkdirAll(location, 0o700); err != nil {
			return nil, nil, err
		}
	} else if _, err := os.Stat(db); err != nil {
		return nil, nil, fmt.Errorf("no store in the data dir: %w", err)
	}
	lock, err := dirlock.Acquire(location, LockFile)
	if err != nil {
		return nil, nil, err
	}
	st, err = store.Open(ctx, db, store.Options{})
	if err != nil {
		return nil, nil, errors.Join(err, lock.Release())
	}
	return st, func() { st.Close(); lock.Release() }, nil
}

// BackupStore writes a consistent copy of the SQLite store in dataDir to
// the new file to, while a server runs on dataDir. To restore it, make it
// the database of a data dir (DATA/edgeaip.db) beside its admin.token,
// and start a server there.
func BackupStore(ctx context.Context, dataDir, to string) error {
	return store.Backup(ctx, filepath.Join(dataDir, DatabaseFile), to)
}
