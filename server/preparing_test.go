package server

import (
	"context"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// commandAsync runs tool on device id with timeout through the API, and
// hands its response over when it ends.
func (ts *testServer) commandAsync(id, tool string, timeout time.Duration) <-chan api.CommandResponse {
	out := make(chan api.CommandResponse, 1)
	go func() {
		resp, err := ts.api.Command(context.Background(), id, api.CommandRequest{
			Actions: []protocol.Command{{ToolName: tool}}, Timeout: timeout.String()})
		assert.NoError(ts.t, err)
		out <- resp
	}()
	return out
}

// preparing is the word of device rc that it prepares the tool of cmd,
// at stage.
func (rc *rawClient) preparing(cmd protocol.ServerMessage, stage string, step uint32) protocol.ClientMessage {
	return protocol.ClientMessage{Type: protocol.ClientPreparing, Status: protocol.StatusContinue, ClientID: rc.id,
		SessionID: cmd.SessionID, PrevResponseID: cmd.ResponseID,
		Preparing: &protocol.Preparing{ToolName: cmd.Actions[0].ToolName, Stage: stage, Step: step, Steps: 3}}
}

// taskEvents are the events of task id, which has ended.
func (ts *testServer) taskEvents(id string) []api.TaskEvent {
	ts.t.Helper()
	var events []api.TaskEvent
	require.NoError(ts.t, ts.api.Events(context.Background(), id, func(e api.TaskEvent) error {
		events = append(events, e)
		return nil
	}))
	return events
}

// A device that has accepted a command and says it prepares the tool
// holds the command's timeout: the command waits through a preparation
// three times its timeout, succeeds, and its task's events say what the
// device said.
func TestACommandWaitsForItsDeviceToPrepareTheTool(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", tool("stock", "hash_file", protocol.ToolDataCollection))
	const timeout = 200 * time.Millisecond
	done := ts.commandAsync("kiosk-1", "hash_file", timeout)
	cmd := dev.nextCommand()
	dev.send(dev.preparing(cmd, "initializing", 2))
	// The command's own timeout passes, three times over, while the
	// device prepares.
	time.Sleep(3 * timeout)
	dev.send(dev.preparing(cmd, protocol.PreparingReady, 3))
	dev.answer(cmd, protocol.ResultSuccess, "r-1")

	resp := <-done
	require.Equal(t, string(protocol.ResultSuccess), resp.Status, resp.FirstError())
	var said []string
	for _, e := range ts.taskEvents(resp.SessionID) {
		if e.Type == api.EventPreparing {
			require.NotNil(t, e.Preparing)
			assert.Equal(t, cmd.ResponseID, e.ResponseID)
			said = append(said, api.PreparingText(e.Preparing))
		}
	}
	assert.Equal(t, []string{"preparing hash_file (initializing, step 2/3)", "hash_file prepared"}, said)
}

// The wait a preparation adds is bounded: a device that never says its
// tool is ready has the command fail at its timeout plus the bound, with
// an error that says so.
func TestTheWaitForAPreparationIsBounded(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Sessions.PreparationBound = 300 * time.Millisecond })
	dev := ts.device("kiosk-1", tool("stock", "hash_file", protocol.ToolDataCollection))
	done := ts.commandAsync("kiosk-1", "hash_file", 100*time.Millisecond)
	cmd := dev.nextCommand()
	dev.send(dev.preparing(cmd, "compiling", 3))

	resp := <-done
	assert.Equal(t, string(protocol.ResultFailure), resp.Status)
	assert.Equal(t, `device "kiosk-1" was still preparing tool "hash_file" (compiling) when the command's timeout of 100ms `+
		`and the preparation bound of 300ms ended; it may still run on the device: a late outcome is recorded on its task`, resp.FirstError())
}
