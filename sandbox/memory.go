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
type callMemory struct {
	limit   uint64 // bytes
	buf     []byte
	sized   bool // the initial allocation is done
	refused bool
	peak    uint64 // bytes; the memory is freed when a module exits
}

// withCallMemory makes the instance created with ctx allocate through m.
func withCallMemory(ctx context.Context, m *callMemory) context.Context {
	return experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(
		func(capacity, _ uint64) experimental.LinearMemory {
			m.buf = make([]byte, 0, min(capacity, m.limit))
			return m
		}))
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
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	grown := make([]byte, size, min(max(size, 2*uint64(cap(m.buf))), max(m.limit, size)))
	copy(grown, m.buf)
	m.buf = grown
	return m.buf
}

// Free implements experimental.LinearMemory.
func (m *callMemory) Free() { m.buf = nil }

// peakPages is the largest size the memory reached, in pages.
func (m *callMemory) peakPages() uint32 { return uint32(m.peak / pageSize) }
