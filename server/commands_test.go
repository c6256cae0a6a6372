package server

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireTaskHolds requires the task of a single command to hold exactly
// the command's response, and the state and error it implies.
func requireTaskHolds(t *testing.T, ts *testServer, resp api.CommandResponse) api.Task {
	t.Helper()
	task, err := ts.api.Task(context.Background(), resp.SessionID)
	require.NoError(t, err)
	assert.Equal(t, api.KindCommand, task.Kind)
	want, err := json.Marshal(resp)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(task.Result))
	if resp.Succeeded() {
		assert.Equal(t, api.StateCompleted, task.State)
		assert.Empty(t, task.Error)
	} else {
		assert.Equal(t, api.StateFailed, task.State)
		assert.Equal(t, resp.FirstError(), task.Error)
	}
	assert.NotNil(t, task.StartedAt)
	assert.NotNil(t, task.FinishedAt)
	return task
}

func TestASingleCommandsTaskHoldsItsResponseHoweverItEnds(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	ctx := context.Background()
	run := func(status protocol.ResultStatus) api.CommandResponse {
		done := make(chan api.CommandResponse, 1)
		go func() {
			resp, err := ts.api.Command(ctx, "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}, {ToolName: "echo"}}})
			assert.NoError(t, err)
			done <- resp
		}()
		dev.answer(dev.nextCommand(), status, "")
		return <-done
	}

	ok := run(protocol.ResultSuccess)
	assert.Equal(t, "success", ok.Status)
	assert.Len(t, requireTaskHolds(t, ts, ok).Commands, 1)

	failed := run(protocol.ResultFailure)
	assert.Equal(t, "failure", failed.Status)
	assert.Equal(t, "it broke", failed.FirstError())
	requireTaskHolds(t, ts, failed)

	// A device on UFO's wire cannot take a tool it does not list without
	// its tool_type: the command never runs, and is never recorded, but
	// each action still gets a Result and the task is recorded. Admission
	// refuses such a command up front; it gets this far when the device's
	// inventory or wire changed since, which running it below admission
	// stands for.
	ufo, err := ts.dialWire(ts.enroll("ufo-1"), protocol.JSON)
	require.NoError(t, err)
	ufo.register("ufo-1")
	never, err := ts.srv.sessions.RunUnadmitted(ctx, operatorCommand("ufo-1"), []protocol.Command{{ToolName: "echo", CallID: "mine"}}, time.Minute)
	require.NoError(t, err)
	assert.Empty(t, never.ResponseID)
	assert.Equal(t, []protocol.Result{{Status: protocol.ResultFailure, CallID: "mine",
		Error: `device "ufo-1" speaks UFO's JSON and does not list "echo": give its tool_type (data_collection or action)`}}, never.Results)
	assert.Empty(t, requireTaskHolds(t, ts, never).Commands)
}
