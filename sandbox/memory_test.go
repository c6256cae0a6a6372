package sandbox

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCallMemoryGrowsInPlaceUpToItsLimit(t *testing.T) {
	m := (&callMemory{limit: 8 * pageSize}).allocate(pageSize)
	defer m.Free()
	first := m.Reallocate(pageSize)
	require.Len(t, first, pageSize)
	first[0] = 42
	grown := m.Reallocate(8 * pageSize)
	require.Len(t, grown, 8*pageSize)
	assert.Equal(t, byte(42), grown[0], "what the tool wrote survives growth")
	assert.Zero(t, grown[5*pageSize], "new pages are zero")
	if runtime.GOOS == "linux" {
		assert.Equal(t, unsafe.SliceData(first), unsafe.SliceData(grown), "on Linux memory is a mapping and never moves")
	}
	assert.Nil(t, m.Reallocate(9*pageSize), "past the limit growth is refused")
	assert.True(t, m.refused)
	assert.Equal(t, uint32(8), m.peakPages())
}

// Linear memory lives outside the Go heap where the system allows, so the
// agent's GOMEMLIMIT bounds the agent itself, not its tools.
func TestCallMemoryIsNotOnTheGoHeapOnLinux(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linear memory is a mapping of its own on Linux only")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := (&callMemory{limit: 512 * pageSize}).allocate(pageSize)
	buf := m.Reallocate(512 * pageSize) // 32 MiB
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	runtime.ReadMemStats(&after)
	m.Free()
	assert.Less(t, after.HeapAlloc-min(after.HeapAlloc, before.HeapAlloc), uint64(1<<20), "32 MiB of tool memory, not on the heap")
}
