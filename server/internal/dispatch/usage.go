package dispatch

import (
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/lazylog"
)

// Bounds of a plausible Result.usage. Usage is the device's word, and it
// feeds counters that may only grow, so figures no sandbox can report
// are dropped rather than recorded.
const (
	// maxUsageWall: a week, longer than any call is kept waiting for.
	maxUsageWall = 7 * 24 * time.Hour
	// maxUsageFuel: 2^53, past which a float64 counter no longer counts
	// single units; a week at a billion operators a second is far below.
	maxUsageFuel = 1 << 53
	// maxUsagePages: 4 GiB, all a 32-bit WebAssembly memory can hold.
	maxUsagePages = 1 << 16
)

// usageProblem says what is implausible about u, or returns nil.
func usageProblem(u *protocol.Usage) error {
	switch {
	case u.WallMicros < 0 || u.WallMicros > maxUsageWall.Microseconds():
		return fmt.Errorf("field %q: %d is outside [0, %d]", "usage.wall_us", u.WallMicros, maxUsageWall.Microseconds())
	case u.Fuel > maxUsageFuel:
		return fmt.Errorf("field %q: %d is more than %d", "usage.fuel", u.Fuel, uint64(maxUsageFuel))
	case u.MemoryPages > maxUsagePages:
		return fmt.Errorf("field %q: %d is more than %d", "usage.memory_pages", u.MemoryPages, maxUsagePages)
	case u.StdoutBytes < 0:
		return fmt.Errorf("field %q: %d is negative", "usage.stdout_bytes", u.StdoutBytes)
	}
	return nil
}

// dropImplausibleUsage removes the usage of each result whose figures are
// implausible, with a warning; the results themselves stand.
func dropImplausibleUsage(results []protocol.Result, log *lazylog.Logger) {
	for i := range results {
		r := &results[i]
		if r.Usage == nil {
			continue
		}
		if err := usageProblem(r.Usage); err != nil {
			log.Warn("usage dropped: the device reported what no sandbox measures", "call_id", r.CallID, "err", err)
			r.Usage = nil
		}
	}
}
