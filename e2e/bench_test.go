package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/benchlat"
	"github.com/edgeaip/edgeaip/internal/natstest"
	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/require"
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
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) { roundTrips(b, c.api, "bench-1", req, callers) })
	}
}

// roundTrips runs b.N commands req for device through client, callers
// at once, and reports their p50 and p99 latency.
func roundTrips(b *testing.B, client *api.Client, device string, req api.CommandRequest, callers int) {
	benchlat.Run(b, callers, func(int) error {
		resp, err := client.Command(context.Background(), device, req)
		if err == nil && !resp.Succeeded() {
			err = fmt.Errorf("failed: %+v", resp.Results)
		}
		return err
	})
}

// BenchmarkCrossNodeRoundTrip is BenchmarkRoundTrip's path in cluster
// mode: two nodes in this process sharing one PostgreSQL database and one
// NATS server, the agent linked to node b. via=local asks node b;
// via=cross asks node a, which records the command, sends it to b over
// NATS, and hears its results, recorded by b, back over NATS. Both on the
// same store, side by side.
func BenchmarkCrossNodeRoundTrip(b *testing.B) {
	nats, db := natstest.Start(b), pgtest.Shared(b).NewDatabase(b)
	a := newCluster(b, clusterNode(b, nats.URL(), db, "a", ""))
	nodeB := newCluster(b, clusterNode(b, nats.URL(), db, "b", a.api.Token))
	nodeB.startAgent("bench-1", a.enroll("bench-1"))
	req := api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo", Parameters: map[string]any{"n": 1}}}}
	for _, via := range []*api.Client{nodeB.api, a.api} {
		if _, err := via.Command(context.Background(), "bench-1", req); err != nil {
			b.Fatalf("warm-up command: %v", err)
		}
	}
	for _, callers := range []int{1, 64} {
		for _, via := range []struct {
			name   string
			client *api.Client
		}{{"local", nodeB.api}, {"cross", a.api}} {
			b.Run(fmt.Sprintf("callers=%d/via=%s", callers, via.name), func(b *testing.B) {
				roundTrips(b, via.client, "bench-1", req, callers)
			})
		}
	}
}

// clusterNode makes a server node id of a cluster on nats and the
// PostgreSQL database db, with the operator token token ("": a new one).
func clusterNode(t testing.TB, nats, db, id, token string) func(*server.Config) {
	return func(c *server.Config) {
		c.Store.URL = db
		c.Cluster = server.ClusterConfig{NATS: nats, NodeID: id, Address: id + ":8700"}
		if token != "" {
			require.NoError(t, os.WriteFile(filepath.Join(c.DataDir, server.AdminTokenFile), []byte(token), 0o600))
		}
	}
}

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
