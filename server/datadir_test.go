package server

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The server makes its data dir 0700 and every file in it 0600: the
// store (with its -wal and -shm, which SQLite makes with the database's
// mode) holds token hashes, the audit log and every result.
func TestTheDataDirIsTheOwnersAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	ts := newTestServer(t, func(c *Config) { c.DataDir = dir })
	ts.addIdentity("ann", api.RoleViewer, nil) // a write: the WAL has it

	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())
	var seen []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if path == dir {
			return nil
		}
		info, err := d.Info()
		require.NoError(t, err)
		seen = append(seen, d.Name())
		assert.Equal(t, os.FileMode(0), info.Mode().Perm()&0o077, "%s is %v", path, info.Mode())
		return nil
	}))
	if ts.srv.store.Backend() == "sqlite" {
		assert.Subset(t, seen, []string{DatabaseFile, DatabaseFile + "-wal", DatabaseFile + "-shm", AdminTokenFile})
	}
}

// A data dir, or files in it, made wider before (an older version, a
// restore) are warned about at the start, with the command that fixes
// them.
func TestAWiderDataDirIsWarnedAbout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644))
	require.NoError(t, os.Chmod(filepath.Join(dir, "notes.txt"), 0o644))
	ts := newTestServer(t, func(c *Config) { c.DataDir = dir })
	_, err := ts.api.Devices(context.Background())
	require.NoError(t, err, "it still starts")

	logs := ts.logs.String()
	assert.Contains(t, logs, "chmod 700 "+dir)
	assert.Contains(t, logs, "chmod -R go-rwx "+dir)
	assert.Contains(t, logs, "notes.txt")
}
