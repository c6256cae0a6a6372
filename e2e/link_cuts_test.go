package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNoCommandFailsBecauseItsLinkWasCutAsItStarted runs 300 commands
// through a real server and a real agent while a TCP proxy between them
// cuts the link 20 times, each cut aimed at commands in flight: the
// commands of a burst start together on a live link, and the link is cut
// a random 0-40 ms later, while some are being recorded, some sent, some
// running and some answered. The device comes back each time, well
// within its grace, so every command must succeed, having run exactly
// once (each appends a line to a file of its own): a command whose link
// drops while it is recorded waits for the device like any other, and is
// never failed as "offline".
func TestNoCommandFailsBecauseItsLinkWasCutAsItStarted(t *testing.T) {
	if testing.Short() {
		t.Skip("the link cut test takes a while; run without -short")
	}
	const bursts, perBurst = 20, 15
	c := newCluster(t)
	proxy := newCutProxy(t, c.hostPort())
	files := t.TempDir()
	// With pings every 250 ms a link counts as stable after 500 ms, and
	// the agent's reconnection backoff starts over (0.5 s at most).
	c.startAgent("cuts-1", c.enroll("cuts-1"), withMounts(sandbox.Mount{HostPath: files, GuestPath: files}),
		func(cfg *agent.Config) {
			cfg.ServerURL = "ws://" + proxy.addr() + "/ws"
			cfg.Conn.PingInterval = 250 * time.Millisecond
		})

	fileOf := func(i int) string { return filepath.Join(files, fmt.Sprintf("cmd-%03d", i)) }
	outcomes := make([]api.CommandResponse, bursts*perBurst)
	errs := make([]error, bursts*perBurst)
	var wg sync.WaitGroup
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	start, cuts := time.Now(), 0
	// A cut that finds no link (the agent dropped it itself, say) does
	// not count; the bursts are over by the 20th that does.
	for b := 0; cuts < bursts; b++ {
		require.Less(t, b, 2*bursts, "only %d of %d cuts found a live link", cuts, b)
		// The agent's new link, registered and stable: the server may
		// not have noticed the last cut yet, so its online flag alone
		// does not say that.
		require.Eventually(t, func() bool { return proxy.open() > 0 }, 20*time.Second, 5*time.Millisecond, "the agent never came back")
		c.waitOnline("cuts-1", true)
		time.Sleep(600 * time.Millisecond)
		for i := b * perBurst; i < (b+1)*perBurst && i < len(outcomes); i++ {
			wg.Go(func() {
				outcomes[i], errs[i] = c.api.Command(context.Background(), "cuts-1", api.CommandRequest{Timeout: "1m", Actions: []protocol.Command{
					{ToolName: "write_file", Parameters: map[string]any{"path": fileOf(i), "content": "ran\n", "append": true}},
					{ToolName: "pause", Parameters: map[string]any{"ms": i % 4 * 20}},
				}})
			})
		}
		time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
		if proxy.cut() > 0 {
			cuts++
		}
	}
	wg.Wait()
	t.Logf("%d commands, %d cuts of a live link, in %s", len(outcomes), cuts, time.Since(start).Round(time.Millisecond))

	failed := 0
	for i, resp := range outcomes {
		require.NoError(t, errs[i], "command %d", i)
		if !resp.Succeeded() {
			failed++
			t.Errorf("command %d failed: %s", i, resp.FirstError())
			continue
		}
		assert.Equal(t, 1, countLines(t, fileOf(i)), "command %d ran once", i)
		requireRecordedOnce(t, c, resp)
	}
	assert.Zero(t, failed, "commands failed although their device came back")
}
