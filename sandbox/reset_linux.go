package sandbox

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// keepPast is how much of a region past its image a reset keeps: a Go
// tool's calls write a few pages there, if any; what a call that grew its
// memory far wrote beyond is given back, not kept zeroed for the next.
// A multiple of any page size.
const keepPast = 1 << 20

// Bits of a /proc/self/pagemap entry (the kernel's
// Documentation/admin-guide/mm/pagemap.rst); a process may read them of
// its own pages without privilege.
const (
	pagemapPresent = 1 << 63
	pagemapSwapped = 1 << 62
	pagemapFile    = 1 << 61 // a page of a file (or shared memory), not a private copy
)

// reset makes r, a region of the image whose first used bytes a call had
// as its memory, hold the image and zeros again, keeping mapped the pages
// the next call would otherwise fault in again.
//
// In a private mapping of the image a page the call only read is still
// the image's (the page cache's), and one it never touched is not mapped
// at all; a page it wrote is a private copy, anonymous, as is any page of
// the zero-filled rest it touched. pagemap tells them apart, and only the
// private pages are written back: with the image's bytes, copied from
// its view (or read from its file), or with zeros past it. They stay mapped, writable, so a next call
// that writes them again, as calls of one tool mostly do, takes no fault
// for them, and the image pages it reads are mapped already. A private
// page swapped out is read back by the write, as any other.
//
// Pages past used are not looked at: a call's memory ends there, and the
// calls before it left them as the image, as this one leaves its own.
// Nor are pages more than keepPast past the image: a call that grew its
// memory far gives those pages back to the system, with MADV_DONTNEED,
// so that an idle region holds at most the image and keepPast.
// Without pagemap, the whole region is dropped instead (MADV_DONTNEED:
// the next access reads the image or zeros), which costs the next call a
// fault for each page it touches.
func (im *image) reset(r []byte, used uint64) error {
	im.mu.RLock()
	defer im.mu.RUnlock()
	if im.freed {
		return errImageFreed
	}
	if im.pagemap < 0 {
		return unix.Madvise(r, unix.MADV_DONTNEED)
	}
	page := uint64(os.Getpagesize())
	used = min((max(used, im.size)+page-1)/page*page, uint64(len(r)))
	if kept := im.size + keepPast; used > kept {
		if err := unix.Madvise(r[kept:used], unix.MADV_DONTNEED); err != nil {
			return fmt.Errorf("madvise: %w", err)
		}
		used = kept
	}
	entries := make([]uint64, used/page)
	base := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(r))))
	if err := preadFull(im.pagemap, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(entries))), len(entries)*8), int64(base/page*8)); err != nil {
		return fmt.Errorf("pagemap: %w", err)
	}
	for i := 0; i < len(entries); {
		if !private(entries[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(entries) && private(entries[j]) {
			j++
		}
		if err := im.rewrite(r[uint64(i)*page:uint64(j)*page], uint64(i)*page); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// openPagemap opens /proc/self/pagemap if it tells a page written in a
// private mapping for what it is; -1 if not. reset trusts it to find every
// page a call wrote, so a kernel that reported such a page as absent, or
// as a file's, would leak one call's writes to the next: such a pagemap is
// not used, and regions are dropped whole instead.
func openPagemap() int {
	fd, err := unix.Open("/proc/self/pagemap", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	probe, err := mapRegion(uint64(os.Getpagesize()))
	if err != nil {
		unix.Close(fd)
		return -1
	}
	defer unmapRegion(probe)
	probe[0] = 1
	var entry uint64
	at := int64(uintptr(unsafe.Pointer(unsafe.SliceData(probe)))) / int64(len(probe)) * 8
	if preadFull(fd, unsafe.Slice((*byte)(unsafe.Pointer(&entry)), 8), at) != nil || !private(entry) || entry&pagemapPresent == 0 {
		unix.Close(fd)
		return -1
	}
	return fd
}

// private reports whether a pagemap entry is a page of the call's own.
func private(entry uint64) bool {
	return entry&pagemapSwapped != 0 || entry&pagemapPresent != 0 && entry&pagemapFile == 0
}

// rewrite puts back in b, the bytes at off of a region, what the image
// holds there, and zeros past it. Hold im.mu for reading.
func (im *image) rewrite(b []byte, off uint64) error {
	if off < im.size {
		n := min(uint64(len(b)), im.size-off)
		if im.view != nil {
			copy(b[:n], im.view[off:off+n])
		} else if err := preadFull(im.fd, b[:n], int64(off)); err != nil {
			return fmt.Errorf("snapshot image: %w", err)
		}
		b = b[n:]
	}
	clear(b)
	return nil
}

// preadFull reads len(b) bytes at off of fd.
func preadFull(fd int, b []byte, off int64) error {
	for done := 0; done < len(b); {
		n, err := unix.Pread(fd, b[done:], off+int64(done))
		if err != nil || n == 0 {
			return fmt.Errorf("read at %d: %w", off+int64(done), cmp.Or(err, io.ErrUnexpectedEOF))
		}
		done += n
	}
	return nil
}
