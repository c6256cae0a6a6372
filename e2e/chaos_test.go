package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
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
// them cuts the link at random moments, at least 20 times (counting only
// cuts of a link that was there), and the agent is killed with SIGKILL in
// the middle of a command and started again on its data dir, twice. The
// commands are spread over the cuts: command i starts only after cut
// i·20/500, so that every cut meets commands in flight. Each command
// appends a line to a file of its own, then pauses up to 200 ms, so a
// command run twice leaves two lines. Every command must end with one outcome: success with
// exactly one line, or, for a command the agent was running when it was
// killed, "agent restarted while the command ran" with at most one; and
// the server's record of each task holds that one outcome. Nothing may be
// lost to a cut, and nothing fails as "offline": between links the device
// is in its grace.
//
// The paths the test is about must have run: each kill interrupts a
// command known to be running (its first action has written its file),
// which must be reported interrupted and not run again; and the agent must
// have answered a command the server sent again from its outbox.
func TestChaosEveryCommandEndsWithExactlyOneOutcome(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos test takes a while; run without -short")
	}
	const commands, callers, minCuts, kills = 500, 8, 20, 2
	c := newCluster(t)
	proxy := newCutProxy(t, c.hostPort())
	files := t.TempDir()
	// A link counts as stable after two pings: with pings every 250 ms, a
	// good part of the links live that long between cuts, so that the
	// agent's reconnection backoff starts over often enough.
	yaml := agentYAML(t, "chaos-1", "ws://"+proxy.addr()+"/ws", c.enroll("chaos-1"), t.TempDir(), files)
	p := newAgentProcess(t, strings.Replace(yaml, "ping: 1s", "ping: 250ms", 1))
	p.start()
	c.waitOnline("chaos-1", true)

	// run runs a command. The device is never offline: between links it
	// is in its grace, and a command waits for it.
	run := func(actions ...protocol.Command) (api.CommandResponse, error) {
		return c.api.Command(context.Background(), "chaos-1", api.CommandRequest{Timeout: "2m", Actions: actions})
	}
	fileOf := func(name string, i int) string { return filepath.Join(files, fmt.Sprintf("%s-%03d", name, i)) }
	appendTo := func(path string) protocol.Command {
		return protocol.Command{ToolName: "write_file", Parameters: map[string]any{"path": path, "content": "ran\n", "append": true}}
	}
	outcomes := make([]api.CommandResponse, commands)
	errs := make([]error, commands)
	var next, finished, cuts atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < commands; i = int(next.Add(1) - 1) {
				for cuts.Load() < int64(i*minCuts/commands) {
					time.Sleep(5 * time.Millisecond)
				}
				outcomes[i], errs[i] = run(appendTo(fileOf("cmd", i)),
					protocol.Command{ToolName: "pause", Parameters: map[string]any{"ms": i % 5 * 50}})
				finished.Add(1)
			}
		})
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()

	// killMidCommand starts a command that writes its first file, pauses
	// and writes a second, and kills the agent once the first is written.
	interruptedByKill := make([]chan api.CommandResponse, kills)
	killMidCommand := func(k int) {
		interruptedByKill[k] = make(chan api.CommandResponse, 1)
		go func() {
			resp, err := run(appendTo(fileOf("kill-first", k)),
				protocol.Command{ToolName: "pause", Parameters: map[string]any{"ms": 3000}},
				appendTo(fileOf("kill-second", k)))
			if err != nil {
				resp.Status = "error: " + err.Error()
			}
			interruptedByKill[k] <- resp
		}()
		require.Eventually(t, func() bool { return countLines(t, fileOf("kill-first", k)) > 0 },
			time.Minute, 5*time.Millisecond, "the command to be interrupted never ran")
		t.Logf("kill %d at %v", k, time.Now().Format("05.000"))
		p.kill()
		p.start()
	}

	seed := uint64(time.Now().UnixNano())
	t.Logf("chaos seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	killed := 0
	for cuts.Load() < minCuts || !isClosed(allDone) {
		// Timed from the registration, not from the last cut, so that the
		// agent's backoff does not eat the link's life: about a third of
		// the links are cut before they count as stable.
		c.waitOnline("chaos-1", true)
		time.Sleep(time.Duration(50+rng.IntN(1400)) * time.Millisecond)
		if killed < kills && finished.Load() >= int64((killed+1)*commands/(kills+1)) {
			killMidCommand(killed)
			killed++
			continue
		}
		if proxy.cut() > 0 {
			cuts.Add(1)
		}
	}

	interrupted := 0
	seen := map[string]bool{}
	for i := range commands {
		require.NoError(t, errs[i], "command %d", i)
		resp := outcomes[i]
		require.Len(t, resp.Results, 2, "command %d: %+v", i, resp)
		require.False(t, seen[resp.ResponseID], "command %d: response_id %s twice", i, resp.ResponseID)
		seen[resp.ResponseID] = true
		r := resp.Results[0]
		assert.Equal(t, r.Status, resp.Results[1].Status, "command %d: both actions end alike: %+v", i, resp)
		requireRecordedOnce(t, c, resp)
		lines := countLines(t, fileOf("cmd", i))
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
	for k, done := range interruptedByKill {
		resp := <-done
		require.Len(t, resp.Results, 3, "kill %d: %+v", k, resp)
		requireRecordedOnce(t, c, resp)
		for _, r := range resp.Results {
			assert.Equal(t, "agent restarted while the command ran", r.Error, "kill %d", k)
		}
		assert.Equal(t, 1, countLines(t, fileOf("kill-first", k)), "kill %d: not run again after the restart", k)
		assert.Zero(t, countLines(t, fileOf("kill-second", k)), "kill %d: never got past the pause", k)
	}
	log, err := os.ReadFile(p.log)
	require.NoError(t, err)
	answered := bytes.Count(log, []byte("command already done; sending its results again"))
	assert.Positive(t, answered, "a command the server sent again was answered from the outbox")
	t.Logf("%d commands, %d cuts of a live link, %d kills mid-command, %d other commands interrupted by a kill, "+
		"%d commands sent again answered from the outbox", commands, cuts.Load(), killed, interrupted, answered)
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
	require.Len(t, rec.Results, len(resp.Results))
	for i, r := range resp.Results {
		require.Equal(t, r.Status, rec.Results[i].Status)
		require.Equal(t, r.Error, rec.Results[i].Error)
	}
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
