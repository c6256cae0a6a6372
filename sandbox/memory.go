package sandbox

import (
	"context"

	"github.com/tetratelabs/wazero/experimental"
)

const pageSize = 65536

// callMemory backs the linear memory of one call. It enforces the call's
// page limit and remembers whether it refused to grow, so that a failure
// can say the limit was the cause. wazero's own limit is runtime-wide;
// this one is per tool.
//
// Where the system allows, the memory is a mapping of its own (mapRegion),
// outside the Go heap: the agent's GOMEMLIMIT then bounds the agent alone,
// growing never copies, and a call's memory is given back the moment
// the call ends, instead of when the collector gets to it: its region
// goes back to its image (the snapshot's, or the tool's blank one),
// reset, for the next call (image.release), and what the image cannot
// keep goes back to the system.
type callMemory struct {
	limit   uint64 // bytes
	region  []byte // the mapping the memory grows in, if any
	buf     []byte
	sized   bool // the initial allocation is done
	refused bool
	peak    uint64 // bytes; the memory is freed when a module exits
	// image, if set, is the snapshot the memory starts from: mapped
	// copy-on-write at the start of the region, or copied where there is
	// no region. The memory is grown to its size after instantiation.
	image *image
	// err says why the image could not be put in place; the call must not
	// run then.
	err error
}

// withCallMemory makes the instance created with ctx allocate through m.
func withCallMemory(ctx context.Context, m *callMemory) context.Context {
	return experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(
		func(capacity, _ uint64) experimental.LinearMemory { return m.allocate(capacity) }))
}

// allocate prepares the memory, capacity being the module's initial size.
// That may exceed the limit (Load checks the memories a module exports,
// not others), so a mapping holds whichever is larger.
func (m *callMemory) allocate(capacity uint64) *callMemory {
	newRegion := mapRegion
	if m.image != nil {
		newRegion = m.image.region
	}
	if region, err := newRegion(max(m.limit, capacity)); err == nil {
		m.region = region
		m.buf = region[:0]
		return m
	}
	if m.image == nil {
		m.buf = make([]byte, 0, min(capacity, m.limit))
		return m
	}
	m.buf = make([]byte, 0, max(min(capacity, m.limit), m.image.size))
	m.err = m.image.copyTo(m.buf[:m.image.size])
	return m
}

// Reallocate implements experimental.LinearMemory. The first call sizes the
// memory to the module's declared minimum, which Load has checked against
// the limit; later calls grow it.
func (m *callMemory) Reallocate(size uint64) []byte {
	if size > m.limit && m.sized {
		m.refused = true
		return nil
	}
	m.sized = true
	m.peak = max(m.peak, size)
	if m.region != nil && size <= uint64(len(m.region)) {
		m.buf = m.region[:size]
		return m.buf
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	grown := make([]byte, size, min(max(size, 2*uint64(cap(m.buf))), max(m.limit, size)))
	copy(grown, m.buf)
	m.buf = grown
	return m.buf
}

// Free implements experimental.LinearMemory. wazero calls it when the
// instance closes, after which nothing reads the memory.
func (m *callMemory) Free() {
	switch {
	case m.region == nil:
	case m.image != nil:
		m.image.release(m.region, m.peak)
	default:
		unmapRegion(m.region)
	}
	m.region = nil
	m.buf = nil
}

// peakPages is the largest size the memory reached, in pages.
func (m *callMemory) peakPages() uint32 { return uint32(m.peak / pageSize) }
