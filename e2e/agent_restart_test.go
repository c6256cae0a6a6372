package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// execAsync runs a command through the API in the background.
func (c *cluster) execAsync(id string, req api.CommandRequest) <-chan api.CommandResponse {
	done := make(chan api.CommandResponse, 1)
	go func() {
		resp, err := c.api.Command(context.Background(), id, req)
		if err != nil {
			resp.Status = "error: " + err.Error()
		}
		done <- resp
	}()
	return done
}

func TestSIGTERMFinishesTheCommandInFlightAndExitsCleanly(t *testing.T) {
	c := newCluster(t)
	files := t.TempDir()
	p := newAgentProcess(t, agentYAML(t, "kiosk-1", c.wsURL(), c.enroll("kiosk-1"), t.TempDir(), files))
	p.start()
	c.waitOnline("kiosk-1", true)

	done := c.execAsync("kiosk-1", api.CommandRequest{Timeout: "30s", Actions: []protocol.Command{
		{ToolName: "pause", Parameters: map[string]any{"ms": 1500}},
		{ToolName: "write_file", Parameters: map[string]any{"path": filepath.Join(files, "done.txt"), "content": "finished"}},
	}})
	p.waitLogged("command received")
	require.NoError(t, p.term(), "exit status 0")

	resp := <-done
	require.Equal(t, "success", resp.Status, "%+v", resp.Results)
	got, err := os.ReadFile(filepath.Join(files, "done.txt"))
	require.NoError(t, err)
	assert.Equal(t, "finished", string(got))
	assert.True(t, p.logged("shutting down: taking no new commands"))
	c.waitOnline("kiosk-1", false)
}

func TestAnAgentKilledMidCommandReportsItAfterRestartWithoutRunningItAgain(t *testing.T) {
	c := newCluster(t)
	files, data := t.TempDir(), t.TempDir()
	p := newAgentProcess(t, agentYAML(t, "kiosk-1", c.wsURL(), c.enroll("kiosk-1"), data, files))
	p.start()
	c.waitOnline("kiosk-1", true)

	marker := filepath.Join(files, "after-pause.txt")
	done := c.execAsync("kiosk-1", api.CommandRequest{Timeout: "60s", Actions: []protocol.Command{
		{ToolName: "pause", Parameters: map[string]any{"ms": 5000}},
		{ToolName: "write_file", Parameters: map[string]any{"path": marker, "content": "ran"}},
	}})
	// Killed once the command is in the outbox, so that it has been taken
	// (the agent logs "command received" before it records it: a kill
	// before then loses it, and the server sends it again to be run once).
	p.waitLogged("command received")
	c.waitRecordedInOutbox(filepath.Join(data, "outbox", "kiosk-1.journal"))
	p.kill()
	p.start()

	resp := <-done
	require.Len(t, resp.Results, 2, "%+v", resp)
	for _, r := range resp.Results {
		assert.Equal(t, protocol.ResultFailure, r.Status)
		assert.Equal(t, "agent restarted while the command ran", r.Error)
	}
	_, err := os.Stat(marker)
	assert.ErrorIs(t, err, os.ErrNotExist, "the command was not run again")
}

// waitRecordedInOutbox waits until the agent's outbox journal holds the
// response_id of the one command running on the server.
func (c *cluster) waitRecordedInOutbox(journal string) {
	c.t.Helper()
	require.EventuallyWithT(c.t, func(t *assert.CollectT) {
		page, err := c.api.TaskPage(context.Background(), api.TaskQuery{State: api.StateRunning})
		require.NoError(t, err)
		require.Len(t, page.Tasks, 1)
		task, err := c.api.Task(context.Background(), page.Tasks[0].SessionID)
		require.NoError(t, err)
		require.Len(t, task.Commands, 1)
		b, err := os.ReadFile(journal)
		require.NoError(t, err)
		assert.True(t, bytes.Contains(b, []byte(task.Commands[0].ResponseID)), "journal holds %s", task.Commands[0].ResponseID)
	}, 20*time.Second, 20*time.Millisecond)
}
