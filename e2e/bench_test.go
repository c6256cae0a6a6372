package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
)

// BenchmarkRoundTrip is the whole path: operator API → server → agent →
// sandbox (echo.wat) → agent → server → operator, on loopback, with 1 and
// with 64 concurrent callers. It reports the p50 and p99 latency of one
// command; ns/op is wall time per command across all callers. A command
// that fails fails the benchmark, which then reports no latencies: those
// of the commands never sent would be zeros.
func BenchmarkRoundTrip(b *testing.B) {
	c := newCluster(b)
	c.startAgent("bench-1", c.enroll("bench-1"))
	req := api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo", Parameters: map[string]any{"n": 1}}}}
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			lat := make([]time.Duration, b.N)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for range callers {
				wg.Go(func() {
					for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
						start := time.Now()
						resp, err := c.api.Command(context.Background(), "bench-1", req)
						lat[i] = time.Since(start)
						if err != nil || !resp.Succeeded() {
							b.Errorf("command %d failed: %v %+v", i, err, resp.Results)
							next.Store(int64(b.N)) // the other callers stop too
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if b.Failed() {
				b.FailNow()
			}
			slices.Sort(lat)
			b.ReportMetric(micros(lat[len(lat)/2]), "p50-µs")
			b.ReportMetric(micros(lat[(len(lat)*99)/100]), "p99-µs")
		})
	}
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
