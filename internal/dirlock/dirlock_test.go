package dirlock

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestASecondHolderIsRefusedWithTheFirstsPID(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, "lock")
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, "lock"))
	require.NoError(t, err)
	assert.Equal(t, strconv.Itoa(os.Getpid())+"\n", string(b))

	// flock is held per open file, so a second open in this process is
	// refused as another process's would be.
	_, err = Acquire(dir, "lock")
	var held *HeldError
	require.ErrorAs(t, err, &held)
	assert.Equal(t, &HeldError{Dir: dir, PID: os.Getpid()}, held)
	assert.Equal(t, "data dir "+dir+" is in use by another process (pid "+strconv.Itoa(os.Getpid())+")", err.Error())

	require.NoError(t, l.Release())
	b, err = os.ReadFile(filepath.Join(dir, "lock"))
	require.NoError(t, err)
	assert.Empty(t, b, "a released lock names no process")
	l, err = Acquire(dir, "lock")
	require.NoError(t, err, "released, it can be taken again")
	require.NoError(t, l.Release())
}

func TestALockFileThatNamesNoPIDStillRefuses(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir, "lock")
	require.NoError(t, err)
	defer l.Release()
	require.NoError(t, l.f.Truncate(0))
	_, err = Acquire(dir, "lock")
	assert.EqualError(t, err, "data dir "+dir+" is in use by another process")
}

func TestAMissingDirIsAnErrorThatNamesThePath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	_, err := Acquire(dir, "lock")
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Join(dir, "lock"))
}
