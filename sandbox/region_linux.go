package sandbox

import "syscall"

// mapRegion reserves size bytes of zeroed memory outside the Go heap.
// MAP_NORESERVE commits no memory up front: pages are backed as the tool
// touches them, so reserving a tool's whole limit costs nothing until it
// is used.
func mapRegion(size uint64) ([]byte, error) {
	return syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
}

func unmapRegion(b []byte) { syscall.Munmap(b) }
