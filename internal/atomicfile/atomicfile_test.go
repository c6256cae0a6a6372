package atomicfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteReplacesTheFileWholeAndLeavesNoTemporaries(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "dir")
	path := filepath.Join(dir, "module.wasm")
	require.NoError(t, Write(path, []byte("first")))
	require.NoError(t, Write(path, []byte("second, longer")))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "second, longer", string(got))

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left behind")
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	fi, err = os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestWriteFailsWithThePath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	err := Write(filepath.Join(file, "under-a-file"), []byte("x"))
	assert.ErrorContains(t, err, "under-a-file")
}

func TestWriteModeSetsTheModeOverAnOldFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "module.wasm")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o600))
	require.NoError(t, WriteMode(path, []byte("new"), 0o644))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
}
