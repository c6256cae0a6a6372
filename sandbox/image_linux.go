package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// image is a snapshot's memory, in a sealed memfd. Each call maps it
// copy-on-write over the start of its memory region (mapOnto): pages the
// call only reads are the image's own, shared by every call and never
// copied; a page a call writes becomes a private copy, which goes when the
// call's region is unmapped. The seals forbid writing the image at all, so
// no call, nor a bug of ours, can change it for the next call.
//
// Only the pages holding something are written into the memfd; the rest
// are holes, which read as zeros through the mapping and take no memory.
type image struct {
	mu   sync.RWMutex // held for reading while a call maps the image
	fd   int          // -1 once freed
	size uint64
}

var errImageFreed = errors.New("snapshot image freed (the tool was closed)")

// newImage keeps a copy of mem, whose length is a whole number of
// WebAssembly pages.
func newImage(mem []byte) (*image, error) {
	fd, err := unix.MemfdCreate("aip-snapshot", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("snapshot image: memfd_create: %w", err)
	}
	im := &image{fd: fd, size: uint64(len(mem))}
	if err := im.fill(mem); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("snapshot image: %w", err)
	}
	return im, nil
}

// fill writes the pages of mem that are not all zeros, and seals the
// memfd.
func (im *image) fill(mem []byte) error {
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
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(im.fd), unix.F_ADD_SEALS, seals); err != nil {
		return fmt.Errorf("seal: %w", err)
	}
	return nil
}

// mapOnto maps the image copy-on-write over the start of region, a
// mapping of mapRegion at least as long.
func (im *image) mapOnto(region []byte) error {
	im.mu.RLock()
	defer im.mu.RUnlock()
	if im.fd < 0 {
		return errImageFreed
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
	if im.fd < 0 {
		return errImageFreed
	}
	for off := 0; off < len(dst); {
		n, err := unix.Pread(im.fd, dst[off:], int64(off))
		if err != nil || n == 0 {
			return fmt.Errorf("snapshot image: read at %d: %w", off, err)
		}
		off += n
	}
	return nil
}

// free releases the image once no call is mapping it; calls that have
// mapped it keep their mappings.
func (im *image) free() {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.fd >= 0 {
		unix.Close(im.fd)
		im.fd = -1
	}
}
