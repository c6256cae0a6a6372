package e2e

import (
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/require"
)

// A tool that spins holds a core, but not the agent: its heartbeats keep
// reaching the server and another tool call is served meanwhile. Before
// fuel metering, a spinning guest held up Go's garbage collector, and every
// goroutine with it, for as long as it ran.
func TestHeartbeatsAndOtherCallsFlowWhileAToolSpins(t *testing.T) {
	c := newCluster(t)
	seen := make(chan string, 100)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), watchLog(seen),
		// Fuel enough for any machine to reach the timeout first.
		withLimits(sandbox.Limits{Timeout: 5 * time.Second, Fuel: 1 << 60}),
		func(cfg *agent.Config) { cfg.MaxConcurrentCalls, cfg.MaxConcurrentCommands = 4, 4 })

	spun := make(chan api.CommandResponse, 1)
	go func() { spun <- c.exec("kiosk-1", "spin", nil, 30*time.Second) }()
	waitForLog(t, seen, "command received")

	for range 3 {
		waitForLog(t, seen, "heartbeat acknowledged")
	}
	r := onlyResult(t, c.exec("kiosk-1", "echo", map[string]any{"while": "spinning"}, 10*time.Second))
	require.Equal(t, protocol.ResultSuccess, r.Status, r.Error)
	select {
	case <-spun:
		t.Fatal("the spinning tool ended before the checks ran alongside it")
	default:
	}

	requireFailure(t, <-spun, `tool "spin": timed out after 5s`)
}
