//go:build !linux

package sandbox

import (
	"bytes"
	"errors"
	"sync"
)

// image is a snapshot's memory. Elsewhere than on Linux it is a copy on
// the Go heap, copied again into each call's memory: without memfd and
// copy-on-write mappings, a call pays for the whole image, which a Go
// tool's is (about 3 MB), but still not the runtime's start-up.
type image struct {
	mu    sync.RWMutex
	bytes []byte // nil once freed
	size  uint64
}

var errImageFreed = errors.New("snapshot image freed (the tool was closed)")

// newImage keeps a copy of mem; dir is for Linux, which keeps it in a file.
func newImage(_ string, mem []byte) (*image, error) {
	return &image{bytes: bytes.Clone(mem), size: uint64(len(mem))}, nil
}

// newBlankImage is nil: elsewhere than on Linux, calls that start plainly
// keep no regions.
func newBlankImage() *image { return nil }

// region and mapOnto are Linux-only: the memory is copied instead (copyTo).
func (im *image) region(uint64) ([]byte, error) { return nil, errors.ErrUnsupported }

func (im *image) mapOnto([]byte) error { return errors.ErrUnsupported }

func (im *image) release([]byte, uint64) {}

func (im *image) dropIdle() {}

func (im *image) copyTo(dst []byte) error {
	im.mu.RLock()
	defer im.mu.RUnlock()
	if im.bytes == nil {
		return errImageFreed
	}
	copy(dst, im.bytes)
	return nil
}

func (im *image) free() {
	im.mu.Lock()
	defer im.mu.Unlock()
	im.bytes = nil
}
