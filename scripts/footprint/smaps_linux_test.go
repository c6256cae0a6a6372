package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// An image is found by its memfd's name, or by its directory's for an
// unnamed file, and counted by the pages written into it, not by its
// size: its holes take no memory.
func TestSnapshotImagesCountsThePagesWritten(t *testing.T) {
	before, err := snapshotImages(os.Getpid())
	require.NoError(t, err)
	fd, err := unix.MemfdCreate("aip-snapshot", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(fd)
	dir := filepath.Join(t.TempDir(), "aip-snapshots")
	require.NoError(t, os.Mkdir(dir, 0o700))
	file, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	require.NoError(t, err)
	defer unix.Close(file)
	for _, f := range []int{fd, file} {
		require.NoError(t, unix.Ftruncate(f, 1<<20))
		_, err = unix.Pwrite(f, make([]byte, 8192), 0)
		require.NoError(t, err)
	}
	other, err := unix.MemfdCreate("something-else", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(other)
	_, err = unix.Pwrite(other, make([]byte, 8192), 0)
	require.NoError(t, err)

	h, err := snapshotImages(os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, before.memfds+1, h.memfds)
	assert.Equal(t, before.memfdKiB+8, h.memfdKiB, "two pages written, of a MiB")
	assert.Equal(t, before.files+1, h.files)
	assert.Equal(t, before.fileKiB+8, h.fileKiB)
}
