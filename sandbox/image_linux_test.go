package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// An image made in a cache dir is a regular file, not shared memory: its
// pages are page cache the kernel may drop and read again. It has no name,
// so nothing is left in the dir, and it cannot be written through the
// descriptor kept.
func TestAnImageInACacheDirIsAnUnnamedReadOnlyFile(t *testing.T) {
	dir := t.TempDir()
	mem := make([]byte, 2*pageSize)
	copy(mem, "initialized")
	im, err := newImage(dir, mem)
	require.NoError(t, err)
	defer im.free()

	var st unix.Stat_t
	require.NoError(t, unix.Fstat(im.fd, &st))
	assert.Equal(t, uint32(unix.S_IFREG), st.Mode&unix.S_IFMT, "a regular file")
	assert.Zero(t, st.Nlink, "with no name")
	entries, err := os.ReadDir(filepath.Join(dir, imageDir))
	require.NoError(t, err)
	assert.Empty(t, entries)
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(im.fd))
	require.NoError(t, err)
	assert.Contains(t, link, imageDir, "named in /proc as the footprint looks for it")
	_, err = unix.Pwrite(im.fd, []byte("x"), 0)
	assert.Error(t, err, "the descriptor kept cannot write the image")

}
