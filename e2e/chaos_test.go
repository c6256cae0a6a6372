package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChaosEveryCommandEndsWithExactlyOneOutcome runs 500 commands through
// a real server and a real aip-agent process while a TCP proxy between
// them cuts the link at random moments, at least 20 times, and the agent is
// killed with SIGKILL and started again on its data dir, twice. Each
// command appends a line to a file of its own, so a command run twice
// leaves two lines. Every command must end with one outcome: success with
// exactly one line, or, for a command the agent was running when it was
// killed, "agent restarted while the command ran" with at most one; and
// the server's record of each task holds that one outcome. Nothing may be
// lost to a cut. A command the server refuses at once because the device
// is offline was never sent; the caller tries again.
func TestChaosEveryCommandEndsWithExactlyOneOutcome(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos test takes a while; run without -short")
	}
	const commands, callers, minCuts, kills = 500, 8, 20, 2
	c := newCluster(t)
	proxy := newCutProxy(t, c.hostPort())
	files := t.TempDir()
	p := newAgentProcess(t, agentYAML(t, "chaos-1", "ws://"+proxy.addr()+"/ws", c.enroll("chaos-1"), sharedAgentData(t), files))
	p.start()
	c.waitOnline("chaos-1", true)

	fileOf := func(i int) string { return filepath.Join(files, fmt.Sprintf("cmd-%03d", i)) }
	outcomes := make([]api.CommandResponse, commands)
	errs := make([]error, commands)
	var next, finished, offline atomic.Int64
	run := func(i int) {
		for {
			resp, err := c.api.Command(context.Background(), "chaos-1", api.CommandRequest{
				Timeout: "2m",
				Actions: []protocol.Command{{ToolName: "write_file",
					Parameters: map[string]any{"path": fileOf(i), "content": "ran\n", "append": true}}},
			})
			if err == nil && len(resp.Results) == 1 && resp.Results[0].Error == `device "chaos-1" is offline` {
				offline.Add(1)
				time.Sleep(20 * time.Millisecond)
				continue
			}
			outcomes[i], errs[i] = resp, err
			return
		}
	}
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < commands; i = int(next.Add(1) - 1) {
				run(i)
				finished.Add(1)
			}
		})
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()

	seed := uint64(time.Now().UnixNano())
	t.Logf("chaos seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	cuts, killed := 0, 0
	for cuts < minCuts || !isClosed(allDone) {
		time.Sleep(time.Duration(50+rng.IntN(250)) * time.Millisecond)
		if killed < kills && finished.Load() >= int64((killed+1)*commands/(kills+1)) {
			p.kill()
			p.start()
			killed++
			continue
		}
		proxy.cut()
		cuts++
	}

	interrupted := 0
	seen := map[string]bool{}
	for i := range commands {
		require.NoError(t, errs[i], "command %d", i)
		resp := outcomes[i]
		require.Len(t, resp.Results, 1, "command %d: %+v", i, resp)
		require.False(t, seen[resp.ResponseID], "command %d: response_id %s twice", i, resp.ResponseID)
		seen[resp.ResponseID] = true
		r := resp.Results[0]
		requireRecordedOnce(t, c, resp)
		lines := countLines(t, fileOf(i))
		switch {
		case r.Status == protocol.ResultSuccess:
			assert.Equal(t, 1, lines, "command %d succeeded: it ran once", i)
		case r.Error == "agent restarted while the command ran":
			interrupted++
			assert.LessOrEqual(t, lines, 1, "command %d was interrupted: it ran at most once", i)
		default:
			t.Errorf("command %d lost: %s %s (%d lines)", i, r.Status, r.Error, lines)
		}
	}
	assert.Equal(t, kills, killed, "the agent was killed and restarted")
	t.Logf("%d commands, %d cuts, %d kills, %d commands interrupted by a kill, %d refused while offline and tried again",
		commands, cuts, killed, interrupted, offline.Load())
}

// requireRecordedOnce checks the server's record of resp's task: one
// command, with the results the caller got.
func requireRecordedOnce(t *testing.T, c *cluster, resp api.CommandResponse) {
	t.Helper()
	task, err := c.api.Task(context.Background(), resp.SessionID)
	require.NoError(t, err)
	require.Len(t, task.Commands, 1, "session %s", resp.SessionID)
	rec := task.Commands[0]
	require.Equal(t, resp.ResponseID, rec.ResponseID)
	require.Equal(t, "done", rec.Status, "the device's results are recorded: %s", rec.Error)
	require.Len(t, rec.Results, 1)
	require.Equal(t, resp.Results[0].Status, rec.Results[0].Status)
	require.Equal(t, resp.Results[0].Error, rec.Results[0].Error)
}

func countLines(t *testing.T, path string) int {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return bytes.Count(b, []byte("\n"))
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
