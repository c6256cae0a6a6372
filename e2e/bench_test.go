package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
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
	// The first call compiles the tool; left in, it is a cold start that
	// one iteration outlasts -benchtime with, and the figure is its.
	if _, err := c.api.Command(context.Background(), "bench-1", req); err != nil {
		b.Fatalf("warm-up command: %v", err)
	}
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

// BenchmarkReadBurst is n operator reads at once on a real aip-server
// process (GET /api/tasks/{id}, over 200 tasks whose commands carry 8 KiB
// of parameters each, so that each database connection caches pages of
// its own). It reports the database files the server holds open and its
// resident memory right after the burst, and its memory once the server
// has been idle for settleAfterBurst, past the garbage collection Go forces
// every two minutes; ns/op is the burst's wall time. Run it with
// -benchtime=1x: each iteration starts a fresh server, and takes minutes.
func BenchmarkReadBurst(b *testing.B) {
	const settleAfterBurst = 130 * time.Second
	bin := testenv.Command(b, "aip-server")
	for _, n := range []int{2000, 3000} {
		b.Run(fmt.Sprintf("reads=%d", n), func(b *testing.B) {
			var files, rss, settled float64
			for range b.N {
				b.StopTimer()
				data := b.TempDir()
				srv := startServerProcess(b, bin, "127.0.0.1:0", data)
				pid := srv.cmd.Process.Pid
				paths := tasksToRead(b, srv, 200)
				b.StartTimer()
				testenv.GetAtOnce(b, srv.api.BaseURL, srv.api.Token, paths, n)
				b.StopTimer()
				files += float64(testenv.OpenFilesIn(b, pid, data))
				rss += testenv.ResidentKiB(b, pid)
				time.Sleep(settleAfterBurst)
				settled += testenv.ResidentKiB(b, pid)
				srv.kill(b)
			}
			b.ReportMetric(files/float64(b.N), "db-files")
			b.ReportMetric(rss/float64(b.N)/1024, "rss-MiB")
			b.ReportMetric(settled/float64(b.N)/1024, "rss-idle-MiB")
		})
	}
}
