package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// An image is found by its memfd's name, and counted by the pages written
// into it, not by its size: its holes take no memory.
func TestSnapshotImagesCountsTheMemfdsPagesWritten(t *testing.T) {
	before, beforeKiB, err := snapshotImages(os.Getpid())
	require.NoError(t, err)
	fd, err := unix.MemfdCreate("aip-snapshot", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(fd)
	require.NoError(t, unix.Ftruncate(fd, 1<<20))
	_, err = unix.Pwrite(fd, make([]byte, 8192), 0)
	require.NoError(t, err)
	other, err := unix.MemfdCreate("something-else", unix.MFD_CLOEXEC)
	require.NoError(t, err)
	defer unix.Close(other)
	_, err = unix.Pwrite(other, make([]byte, 8192), 0)
	require.NoError(t, err)

	n, kib, err := snapshotImages(os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, before+1, n)
	assert.Equal(t, beforeKiB+8, kib, "two pages written, of a MiB")
}
