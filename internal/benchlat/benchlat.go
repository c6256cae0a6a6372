// Package benchlat runs a benchmark's operations, from concurrent
// workers or one at a time, and reports the latency of one: its p50 and
// p99, in microseconds, beside ns/op.
package benchlat

import (
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Run calls op(i) for each i in [0, b.N), from workers goroutines at
// once, and reports the p50 and p99 of one call's latency; ns/op is then
// wall time per call across all workers. A call that fails fails b and
// stops the workers, and no latencies are reported: those of the calls
// never made would be zeros.
func Run(b *testing.B, workers int, op func(i int) error) {
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range workers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
				start := time.Now()
				err := op(int(i))
				lat[i] = time.Since(start)
				if err != nil {
					b.Errorf("operation %d: %v", i, err)
					next.Store(int64(b.N)) // the other workers stop too
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
	Report(b, lat)
}

// Report reports the p50 and p99 of lat, which it sorts, as the metrics
// p50-µs and p99-µs.
func Report(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(micros(lat[len(lat)/2]), "p50-µs")
	b.ReportMetric(micros(lat[len(lat)*99/100]), "p99-µs")
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// ReportCPU reports the process's CPU time, user and kernel, from now
// until the returned func is called, per op as cpu-µs/op: a loaded
// machine disturbs it less than the wall time.
func ReportCPU(b *testing.B) (stop func()) {
	start := cpuTime(b)
	return func() {
		b.ReportMetric(float64((cpuTime(b)-start).Microseconds())/float64(max(b.N, 1)), "cpu-µs/op")
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
