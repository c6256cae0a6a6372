package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/benchlat"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/mark3labs/mcp-go/mcp"
)

// BenchmarkMCPOverhead is the same call, echo on one device, made one at
// a time through POST /api/devices/{id}/commands (via=api) and through
// /mcp's call_device_tool with mcp-go's client (via=mcp), on one server
// and agent: what the gateway adds. Run with -count, so that the two
// alternate, and compare with benchstat (BENCHMARKS.md).
func BenchmarkMCPOverhead(b *testing.B) {
	// Its limit on calls a minute would be the figure otherwise.
	c := newCluster(b, func(cfg *server.Config) { cfg.MCP.CallsPerMinute = 1 << 30 })
	c.startAgent("bench-1", c.enroll("bench-1"))
	params := map[string]any{"n": 1}
	req := api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo", Parameters: params}}}
	if _, err := c.api.Command(context.Background(), "bench-1", req); err != nil {
		b.Fatalf("warm-up command: %v", err)
	}
	cl, _ := c.mcpClient(c.api.Token)
	call := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "call_device_tool",
		Arguments: map[string]any{"device": "bench-1", "tool": "echo", "arguments": params}}}
	for _, via := range []struct {
		name string
		call func() error
	}{
		{"api", func() error {
			resp, err := c.api.Command(context.Background(), "bench-1", req)
			if err == nil && !resp.Succeeded() {
				b.Errorf("command failed: %+v", resp.Results)
			}
			return err
		}},
		{"mcp", func() error {
			res, err := cl.CallTool(context.Background(), call)
			if err == nil && res.IsError {
				b.Errorf("call failed: %s", text(res))
			}
			return err
		}},
	} {
		b.Run("via="+via.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if err := via.call(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			benchlat.Report(b, lat)
		})
	}
}
