package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// labelled enrolls id with labels, connects and registers it with an echo
// tool.
func (ts *testServer) labelled(id string, labels map[string]string) *rawClient {
	ts.t.Helper()
	resp, err := ts.api.Enroll(context.Background(), api.EnrollRequest{ID: id, Labels: labels})
	require.NoError(ts.t, err)
	rc := ts.mustDial(resp.Token)
	rc.register(id, tool("stock", "echo", protocol.ToolAction))
	return rc
}

func (ts *testServer) fleet(req api.FleetRequest) api.FleetResponse {
	ts.t.Helper()
	var out api.FleetResponse
	require.NoError(ts.t, ts.api.Do(context.Background(), "POST", "/api/fleets", req, &out))
	return out
}

func fleetResult(t *testing.T, task api.Task) api.FleetResult {
	t.Helper()
	var r api.FleetResult
	require.NoError(t, json.Unmarshal(task.Result, &r), string(task.Result))
	return r
}

func deviceStates(r api.FleetResult) map[string]api.TaskState {
	out := map[string]api.TaskState{}
	for _, d := range r.Devices {
		out[d.DeviceID] = d.State
	}
	return out
}

var lobby = map[string]string{"site": "lobby"}

func TestAFleetRunsThePlanOnEveryMatchingDeviceWithinItsConcurrency(t *testing.T) {
	ts := newTestServer(t)
	devs := map[string]*rawClient{}
	for _, id := range []string{"lobby-2", "lobby-1", "lobby-3"} {
		devs[id] = ts.labelled(id, map[string]string{"site": "lobby", "role": "kiosk"})
	}
	other := ts.labelled("cafe-1", map[string]string{"site": "cafe"})

	f := ts.fleet(api.FleetRequest{Labels: lobby, Plan: json.RawMessage(`"task_name: roll\nsteps: [{tool: stock.echo}]"`), Concurrency: 2})
	assert.Equal(t, []string{"lobby-1", "lobby-2", "lobby-3"}, f.Devices, "every match, by id")
	assert.Equal(t, "roll", f.TaskName)
	events := ts.events(f.SessionID)

	first, second := devs["lobby-1"].nextCommand(), devs["lobby-2"].nextCommand()
	task, err := ts.api.Task(context.Background(), f.SessionID)
	require.NoError(t, err)
	assert.Equal(t, api.KindFleet, task.Kind)
	assert.Equal(t, api.StateRunning, task.State)
	assert.Equal(t, map[string]api.TaskState{"lobby-1": api.StateRunning, "lobby-2": api.StateRunning, "lobby-3": api.StatePending},
		deviceStates(fleetResult(t, task)), "two at once: the third waits for a slot")

	devs["lobby-1"].answer(first, protocol.ResultSuccess, "")
	third := devs["lobby-3"].nextCommand()
	devs["lobby-2"].answer(second, protocol.ResultFailure, "")
	devs["lobby-3"].answer(third, protocol.ResultSuccess, "")

	task = ts.waitTask(f.SessionID)
	assert.Equal(t, api.StateFailed, task.State)
	assert.Equal(t, "1 of 3 devices failed", task.Error)
	r := fleetResult(t, task)
	assert.Equal(t, map[string]api.TaskState{"lobby-1": api.StateCompleted, "lobby-2": api.StateFailed, "lobby-3": api.StateCompleted}, deviceStates(r))
	assert.Equal(t, lobby, r.Labels)
	assert.Equal(t, 2, r.Concurrency)
	assert.False(t, r.Aborted)
	for _, d := range r.Devices {
		child, err := ts.api.Task(context.Background(), d.SessionID)
		require.NoError(t, err)
		assert.Equal(t, f.SessionID, child.ParentID)
		assert.Equal(t, d.DeviceID, child.DeviceID)
		assert.Equal(t, "roll", child.TaskName)
		assert.Equal(t, d.State, child.State)
	}
	assert.Contains(t, r.Devices[1].Error, "step 1 (stock.echo) failed: it broke")

	var result api.TaskResult
	require.NoError(t, ts.api.Do(context.Background(), "GET", "/api/task_result/roll", nil, &result))
	assert.Equal(t, "done", result.Status)
	assert.Equal(t, api.StateFailed, result.State, "the task of that name is the fleet, not one of its devices")

	perDevice := map[string][]string{}
	var last api.TaskEvent
	for _, e := range <-events {
		perDevice[e.DeviceID] = append(perDevice[e.DeviceID], e.Type)
		if e.Type == api.EventStepStart || e.Type == api.EventDeviceStart {
			assert.Equal(t, 1, e.Steps)
		}
		assert.Empty(t, e.Results, "a fleet's stream leaves the results to its devices' tasks")
		last = e
	}
	for _, id := range f.Devices {
		assert.Equal(t, []string{"device_start", "step_start", "step_end", "device_end"}, perDevice[id], id)
	}
	assert.Equal(t, api.EventEnd, last.Type)
	assert.Empty(t, last.DeviceID)
	other.ping() // nothing went to the device whose labels do not match
}

func TestAFleetStopsStartingDevicesAtItsAbortThreshold(t *testing.T) {
	ts := newTestServer(t)
	devs := map[string]*rawClient{}
	for _, id := range []string{"a", "b", "c", "d"} {
		devs[id] = ts.labelled(id, lobby)
	}
	f := ts.fleet(api.FleetRequest{Labels: lobby, Plan: json.RawMessage(`{"steps": [{"tool": "echo"}]}`), Concurrency: 1, AbortPercent: 50})
	devs["a"].answer(devs["a"].nextCommand(), protocol.ResultFailure, "") // 25%: go on
	devs["b"].answer(devs["b"].nextCommand(), protocol.ResultFailure, "") // 50%: stop

	task := ts.waitTask(f.SessionID)
	assert.Equal(t, api.StateFailed, task.State)
	assert.Equal(t, "2 of 4 devices failed, 2 not started (aborted: at least 50% failed)", task.Error)
	r := fleetResult(t, task)
	assert.True(t, r.Aborted)
	assert.Equal(t, map[string]api.TaskState{"a": api.StateFailed, "b": api.StateFailed, "c": api.StateSkipped, "d": api.StateSkipped}, deviceStates(r))
	assert.Empty(t, r.Devices[2].SessionID)
	devs["c"].ping()
	devs["d"].ping()
}

func TestCancellingAFleetCancelsItsRunningDevices(t *testing.T) {
	ts := newTestServer(t)
	a := ts.labelled("a", lobby)
	b := ts.labelled("b", lobby)
	f := ts.fleet(api.FleetRequest{Labels: lobby, Plan: json.RawMessage(`"steps: [{tool: echo}]"`), Concurrency: 1})
	cmd := a.nextCommand() // never answered

	cancelled, err := ts.api.CancelTask(context.Background(), f.SessionID)
	require.NoError(t, err)
	assert.Equal(t, api.StateCancelled, cancelled.State)
	stop := a.recvType(protocol.ServerCancelCommand)
	assert.Equal(t, cmd.ResponseID, stop.ResponseID, "the device is asked to stop the command")
	assert.Equal(t, "its fleet "+f.SessionID+" was cancelled", stop.Error)
	a.ping() // and asked once
	r := fleetResult(t, ts.waitTask(f.SessionID))
	assert.Equal(t, map[string]api.TaskState{"a": api.StateCancelled, "b": api.StateSkipped}, deviceStates(r))
	child := ts.waitTask(r.Devices[0].SessionID)
	assert.Equal(t, api.StateCancelled, child.State)
	b.ping()
}

func TestFleetRequestsAreChecked(t *testing.T) {
	ts := newTestServer(t)
	_, err := ts.api.Enroll(context.Background(), api.EnrollRequest{ID: "gone", Labels: map[string]string{"site": "attic"}})
	require.NoError(t, err)
	plan := json.RawMessage(`"steps: [{tool: echo}]"`)
	for _, c := range []struct {
		name string
		req  api.FleetRequest
		code int
		msg  string
	}{
		{"no labels", api.FleetRequest{Plan: plan}, http.StatusBadRequest, `field "labels": at least one label is required`},
		{"no plan", api.FleetRequest{Labels: lobby}, http.StatusBadRequest, `field "plan": missing`},
		{"bad plan", api.FleetRequest{Labels: lobby, Plan: json.RawMessage(`{"steps": []}`)}, http.StatusBadRequest, `field "plan": plan: line 1, column 2: steps: at least one step is required`},
		{"abort over 100", api.FleetRequest{Labels: lobby, Plan: plan, AbortPercent: 101}, http.StatusBadRequest, `field "abort_percent": 101`},
		{"negative concurrency", api.FleetRequest{Labels: lobby, Plan: plan, Concurrency: -1}, http.StatusBadRequest, `field "concurrency": -1`},
		{"no match", api.FleetRequest{Labels: lobby, Plan: plan}, http.StatusNotFound, "no enrolled device has the labels site=lobby"},
	} {
		code, msg := ts.apiStatus("POST", "/api/fleets", c.req)
		assert.Equal(t, c.code, code, c.name)
		assert.Contains(t, msg, c.msg, c.name)
	}

	// A device that is offline when its turn comes fails.
	f := ts.fleet(api.FleetRequest{Labels: map[string]string{"site": "attic"}, Plan: plan})
	r := fleetResult(t, ts.waitTask(f.SessionID))
	assert.Equal(t, api.StateFailed, r.Devices[0].State)
	assert.Contains(t, r.Devices[0].Error, `device "gone" is offline`)
}
