package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/edgeaip/edgeaip/wasmtools/manifest"
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

// A region a call has released is kept for the next call, reset: what the
// call wrote, to a page the image holds, to one of its holes or past the
// image, is gone, and the next call reads the image and zeros, as from a
// new mapping. So for both kinds of image.
// So whether the image's bytes are copied from its view or read from its
// file.
func TestAReleasedRegionIsTheImageAgain(t *testing.T) {
	forEachImageKind(t, func(t *testing.T, im *image, mem []byte) {
		const size = 8 * pageSize
		for _, from := range []string{"view", "file"} {
			if from == "file" && im.view != nil {
				require.NoError(t, unix.Munmap(im.view))
				im.view = nil
			}
			r, err := im.region(size)
			require.NoError(t, err)
			copy(r[10:], "overwritten")
			// Read first: a hole, then written; a page past the image, only read.
			assert.Zero(t, r[pageSize+2]|r[size-2*pageSize])
			r[pageSize+1], r[2*pageSize+5], r[size-1] = 1, 'F', 2
			im.release(r, size)

			again, err := im.region(size)
			require.NoError(t, err)
			assert.Same(t, &r[0], &again[0], "the released region is the one taken again")
			assert.Equal(t, mem, again[:len(mem)], "it holds the image, from the %s", from)
			assert.Equal(t, make([]byte, size-len(mem)), again[len(mem):], "and zeros past it")
			im.release(again, size)
		}
	})
}

// A call that grew its memory far past the image gives back what it wrote
// there when it ends: the idle region keeps no more than keepPast of it.
func TestAResetGivesBackWhatACallWroteFarPastTheImage(t *testing.T) {
	forEachImageKind(t, func(t *testing.T, im *image, mem []byte) {
		size := uint64(len(mem)) + keepPast + 4*pageSize
		r, err := im.region(size)
		require.NoError(t, err)
		defer unmapRegion(r)
		near, far := len(mem)+10, int(size)-pageSize
		r[near], r[far] = 1, 2
		require.NoError(t, im.reset(r, size))
		assert.Equal(t, []bool{true, false}, []bool{resident(t, r[near:]), resident(t, r[far:])},
			"the page near the image is kept, the one far past it given back")
		assert.Zero(t, r[near]|r[far])
	})
}

// resident reports whether b's first page is in memory.
func resident(t *testing.T, b []byte) bool {
	page := os.Getpagesize()
	start := uintptr(unsafe.Pointer(&b[0])) / uintptr(page) * uintptr(page)
	var vec [1]byte
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, start, uintptr(page), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	return vec[0]&1 != 0
}

// An image keeps a few reset regions, not every one its calls released,
// and none once it is freed.
func TestAnImageKeepsFewIdleRegions(t *testing.T) {
	im, err := newImage(t.TempDir(), make([]byte, pageSize))
	require.NoError(t, err)
	regions := make([][]byte, idleRegions+2)
	for i := range regions {
		regions[i], err = im.region(2 * pageSize)
		require.NoError(t, err)
	}
	for _, r := range regions {
		im.release(r, uint64(len(r)))
	}
	assert.Len(t, im.idle, idleRegions)
	im.free()
	assert.Empty(t, im.idle)
	_, err = im.region(2 * pageSize)
	assert.ErrorIs(t, err, errImageFreed)
}

// A call's memory is a copy-on-write mapping of the image: what the call
// writes, to a page the image holds or to one of its holes, stays in its
// own mapping, and the image and every other call see what initialization
// left. So for both kinds of image: a file in the cache dir, and a memfd
// where there is none.
func TestACallsWritesNeverReachTheImage(t *testing.T) {
	forEachImageKind(t, func(t *testing.T, im *image, mem []byte) {
		regions := make([][]byte, 2)
		for i := range regions {
			r, err := mapRegion(8 * pageSize)
			require.NoError(t, err)
			defer unmapRegion(r)
			require.NoError(t, im.mapOnto(r))
			regions[i] = r
		}
		a, b := regions[0], regions[1]
		assert.Equal(t, mem, a[:len(mem)])
		copy(a[10:], "overwritten")
		a[pageSize+1], a[2*pageSize+5] = 1, 'F'
		assert.Equal(t, mem, b[:len(mem)], "another call's mapping does not see the writes")
		assert.Equal(t, make([]byte, len(b)-len(mem)), b[len(mem):], "and past the image, memory is zero")
		copied := make([]byte, len(mem))
		require.NoError(t, im.copyTo(copied))
		assert.Equal(t, mem, copied, "the image holds what it was made from")
	})
}

// forEachImageKind runs test on an image of each kind, a file in a cache
// dir and a memfd where there is none, made from mem: 3 pages, the middle
// one a hole; and on a blank image, whose mem is empty.
func forEachImageKind(t *testing.T, test func(t *testing.T, im *image, mem []byte)) {
	for kind, dir := range map[string]string{"file": t.TempDir(), "memfd": ""} {
		t.Run(kind, func(t *testing.T) {
			mem := make([]byte, 3*pageSize)
			copy(mem[10:], "initialized")
			copy(mem[2*pageSize+5:], "far away")
			im, err := newImage(dir, mem)
			require.NoError(t, err)
			defer im.free()
			test(t, im, mem)
		})
	}
	t.Run("blank", func(t *testing.T) {
		im := newBlankImage()
		defer im.free()
		test(t, im, []byte{})
	})
}

// A tool whose calls start plainly keeps their regions too, in its blank
// image: each call takes the region the one before released, reset to
// zeros, instead of mapping one and unmapping it (TestEachCallGetsAFreshInstance
// checks that nothing a call wrote reaches the next).
func TestPlainCallsTakeTheRegionTheCallBeforeReleased(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	tools := map[string]*Tool{"a command": load(t, sb, "counter", Limits{}), "a plain reactor": state(t, sb, manifest.InitPlain)}
	for name, tool := range tools {
		require.NotNil(t, tool.blank)
		var regions []*byte
		for range 3 {
			require.NoError(t, sb.Call(context.Background(), tool, []byte(`{}`)).Err)
			tool.blank.mu.Lock()
			require.Len(t, tool.blank.idle, 1, "%s: the call's region is kept", name)
			regions = append(regions, &tool.blank.idle[0][0])
			tool.blank.mu.Unlock()
		}
		assert.Equal(t, []*byte{regions[0], regions[0], regions[0]}, regions, "%s: one region serves every call", name)
	}
}

// A tool's calls leave their regions to the next calls, whether they
// start from a snapshot or plainly, but an idle tool gives them back with
// its code.
func TestAnIdleToolDropsItsRegionsWithItsCode(t *testing.T) {
	sb := newSandbox(t, NewConfig().WithUnloadAfter(time.Second))
	snap := state(t, sb, "")
	plain := load(t, sb, "counter", Limits{})
	images := map[string]*image{"snapshot": snap.snap.image, "blank": plain.blank}
	for _, tool := range []*Tool{snap, plain} {
		require.NoError(t, sb.Call(context.Background(), tool, []byte(`{}`)).Err)
	}
	idle := func(im *image) int {
		im.mu.Lock()
		defer im.mu.Unlock()
		return len(im.idle)
	}
	for name, im := range images {
		assert.Equal(t, 1, idle(im), "%s: the call's region is kept", name)
	}
	require.Eventually(t, func() bool { return !snap.loaded() && !plain.loaded() }, 10*time.Second, 10*time.Millisecond)
	for name, im := range images {
		assert.Zero(t, idle(im), "%s: and dropped with the code", name)
	}
}

// On this kernel pagemap is usable, so reset writes back a call's pages
// rather than dropping the whole region: the tests above test that path.
func TestPagemapTellsAWrittenPageHere(t *testing.T) {
	fd := openPagemap()
	require.GreaterOrEqual(t, fd, 0)
	unix.Close(fd)
}
