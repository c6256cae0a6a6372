package sandbox

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// image is a snapshot's memory, in a file of its own. Each call maps it
// copy-on-write over the start of its memory region (mapOnto): pages the
// call only reads are the image's own, shared by every call and never
// copied; a page a call writes becomes a private copy, which gets the
// image's bytes back when the call ends (reset). Nothing writes the file
// once it is filled: the descriptor kept is read-only where /proc allows,
// and a memfd's seals forbid writing it at all, so no call, nor a bug of
// ours, can change it for the next call.
//
// The file is unnamed, in the sandbox's cache dir (O_TMPFILE), where
// there is one: its pages are then the page cache of a regular file,
// which the kernel can drop when memory runs short and read back at the
// next call that needs them, so an idle tool's image costs memory only
// while nothing else wants it. Having no name, it goes with the process:
// no image outlives the boot whose clocks it read. Without a cache dir,
// or on a filesystem without O_TMPFILE, it is a sealed memfd, shared
// memory that stays resident as long as the tool is loaded.
//
// Only the pages holding something are written; the rest are holes,
// which read as zeros through the mapping and take no memory.
//
// A call's region is not unmapped when the call ends but reset to the
// image and kept for a next call (release, reset): that saves the next
// call mapping the region and the image, this one unmapping them, and
// both most of the page faults.
//
// A blank image (newBlankImage) is empty and has no file: it keeps the
// regions of a tool whose calls do not start from a snapshot, reset to
// zeros.
type image struct {
	mu      sync.RWMutex // held for reading while a call maps the image
	freed   bool
	fd      int // the file; -1 for a blank image, and once freed
	pagemap int // /proc/self/pagemap, for reset; -1 if not usable
	size    uint64
	idle    [][]byte // regions reset to the image, for the next calls
	// view is the image mapped read-only and shared, that reset copies
	// from: the page cache itself, so it holds no memory of its own, and
	// the RSS counts only the pages resets read (those calls wrote), until
	// dropIdle. nil if it could not be mapped; reset then reads the file.
	view []byte
}

// idleRegions is how many reset regions an image keeps: one serves calls
// one after the other, a second calls that overlap. Each holds the pages
// its calls wrote (with the image's bytes) and maps those they read,
// which count in the RSS once per region, until the tool's code is
// unloaded as idle (dropIdle); so a burst of calls at once maps regions
// afresh beyond these, as every call did before.
const idleRegions = 2

var errImageFreed = errors.New("snapshot image freed (the tool was closed)")

// imageDir is the directory of the cache dir the images are made in. Its
// name marks them in /proc/PID/fd and smaps, as the memfd's does.
const imageDir = "aip-snapshots"

// newImage keeps a copy of mem, whose length is a whole number of
// WebAssembly pages, in a file in dir (a memfd if dir is "").
func newImage(dir string, mem []byte) (*image, error) {
	fd, sealed, err := imageFile(dir)
	if err != nil {
		return nil, fmt.Errorf("snapshot image: %w", err)
	}
	im := &image{fd: fd, size: uint64(len(mem))}
	if err := im.fill(mem, sealed); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("snapshot image: %w", err)
	}
	im.pagemap = openPagemap()
	if v, err := unix.Mmap(im.fd, 0, int(im.size), unix.PROT_READ, unix.MAP_SHARED); err == nil {
		im.view = v
	}
	return im, nil
}

// newBlankImage is an empty image, with no file, whose regions are all
// zeros: a tool's calls that start plainly take them, and their resets
// zero what a call wrote.
func newBlankImage() *image {
	return &image{fd: -1, pagemap: openPagemap()}
}

// imageFile makes the image's file: unnamed, in dir's images directory,
// or else a memfd, which can be sealed.
func imageFile(dir string) (fd int, sealed bool, err error) {
	if dir != "" {
		sub := filepath.Join(dir, imageDir)
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return -1, false, err
		}
		fd, err := unix.Open(sub, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err == nil {
			return fd, false, nil
		}
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) {
			return -1, false, fmt.Errorf("open a file in %s: %w", sub, err)
		}
	}
	fd, err = unix.MemfdCreate("aip-snapshot", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, false, fmt.Errorf("memfd_create: %w", err)
	}
	return fd, true, nil
}

// fill writes the pages of mem that are not all zeros, then seals a
// memfd, or trades a file's descriptor for a read-only one.
func (im *image) fill(mem []byte, sealed bool) error {
	if err := unix.Ftruncate(im.fd, int64(len(mem))); err != nil {
		return fmt.Errorf("ftruncate: %w", err)
	}
	page := os.Getpagesize()
	zero := make([]byte, page)
	for off := 0; off < len(mem); {
		if bytes.Equal(mem[off:off+page], zero) {
			off += page
			continue
		}
		end := off + page
		for end < len(mem) && !bytes.Equal(mem[end:end+page], zero) {
			end += page
		}
		if _, err := unix.Pwrite(im.fd, mem[off:end], int64(off)); err != nil {
			return fmt.Errorf("pwrite: %w", err)
		}
		off = end
	}
	if !sealed {
		im.reopenReadOnly()
		return nil
	}
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(im.fd), unix.F_ADD_SEALS, seals); err != nil {
		return fmt.Errorf("seal: %w", err)
	}
	return nil
}

// reopenReadOnly replaces the image's descriptor with a read-only one of
// the same file, through /proc; without /proc it keeps the one it has.
func (im *image) reopenReadOnly() {
	ro, err := unix.Open("/proc/self/fd/"+strconv.Itoa(im.fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	unix.Close(im.fd)
	im.fd = ro
}

// region returns a region of n bytes that starts with the image and is
// zero after it: one a call released, or a new one.
func (im *image) region(n uint64) ([]byte, error) {
	if r := im.takeIdle(n); r != nil {
		return r, nil
	}
	r, err := mapRegion(n)
	if err != nil {
		return nil, err
	}
	if err := im.mapOnto(r); err != nil {
		unmapRegion(r)
		return nil, err
	}
	return r, nil
}

// takeIdle takes the region released last, whose pages are the likeliest
// to be mapped still.
func (im *image) takeIdle(n uint64) []byte {
	im.mu.Lock()
	defer im.mu.Unlock()
	for i := len(im.idle) - 1; i >= 0; i-- {
		if r := im.idle[i]; uint64(len(r)) == n {
			im.idle = slices.Delete(im.idle, i, i+1)
			return r
		}
	}
	return nil
}

// release takes back r, which region gave a call whose memory was its
// first used bytes, once nothing reads it: reset undoes what the call
// wrote, so that r is as region made it and nothing of the call remains.
// A region that could not be reset, or that an image freed or full cannot
// keep, is unmapped.
func (im *image) release(r []byte, used uint64) {
	if im.reset(r, used) != nil || !im.keep(r) {
		unmapRegion(r)
	}
}

func (im *image) keep(r []byte) bool {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.freed || len(im.idle) >= idleRegions {
		return false
	}
	im.idle = append(im.idle, r)
	return true
}

// mapOnto maps the image copy-on-write over the start of region, a
// mapping of mapRegion at least as long.
func (im *image) mapOnto(region []byte) error {
	im.mu.RLock()
	defer im.mu.RUnlock()
	if im.freed {
		return errImageFreed
	}
	if im.size == 0 {
		return nil // a blank image: the region's zeros are all of it
	}
	if uint64(len(region)) < im.size {
		return fmt.Errorf("snapshot image: %d bytes do not fit a region of %d", im.size, len(region))
	}
	_, err := unix.MmapPtr(im.fd, 0, unsafe.Pointer(unsafe.SliceData(region)), uintptr(im.size),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED)
	if err != nil {
		return fmt.Errorf("snapshot image: mmap: %w", err)
	}
	return nil
}

// copyTo copies the image into dst, for memory that is not a mapping.
func (im *image) copyTo(dst []byte) error {
	im.mu.RLock()
	defer im.mu.RUnlock()
	if im.freed {
		return errImageFreed
	}
	for off := 0; off < len(dst); {
		n, err := unix.Pread(im.fd, dst[off:], int64(off))
		if err != nil || n == 0 {
			return fmt.Errorf("snapshot image: read at %d: %w", off, cmp.Or(err, io.ErrUnexpectedEOF))
		}
		off += n
	}
	return nil
}

// free releases the image and its idle regions once no call is mapping
// it; calls that have mapped it keep their mappings.
func (im *image) free() {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.freed = true
	if im.fd >= 0 {
		unix.Close(im.fd)
		im.fd = -1
	}
	if im.pagemap >= 0 {
		unix.Close(im.pagemap)
		im.pagemap = -1
	}
	if im.view != nil {
		unix.Munmap(im.view)
		im.view = nil
	}
	im.dropIdleLocked()
}

// dropIdle unmaps the idle regions, and with them the pages they hold,
// and lets go of the view's pages, which stay in the page cache.
func (im *image) dropIdle() {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.dropIdleLocked()
	if im.view != nil {
		unix.Madvise(im.view, unix.MADV_DONTNEED)
	}
}

func (im *image) dropIdleLocked() {
	for _, r := range im.idle {
		unmapRegion(r)
	}
	im.idle = nil
}
