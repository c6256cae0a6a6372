package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/plan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func dispatchPlan(t *testing.T, ts *testServer, device, planDoc string) api.DispatchResponse {
	t.Helper()
	resp, err := ts.api.Dispatch(context.Background(), api.DispatchRequest{ClientID: device, Request: planDoc})
	require.NoError(t, err)
	require.Equal(t, "dispatched", resp.Status)
	return resp
}

func planResult(t *testing.T, task api.Task) api.PlanResult {
	t.Helper()
	var r api.PlanResult
	require.NoError(t, json.Unmarshal(task.Result, &r), string(task.Result))
	return r
}

func TestAPlanRunsItsStepsInOrderWithRetriesAndNamespaces(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", tool("stock", "hash_file", protocol.ToolDataCollection), tool("stock", "echo", protocol.ToolAction))
	d := dispatchPlan(t, ts, "kiosk-1", `
task_name: nightly
steps:
  - tool: stock.hash_file
    parameters: {path: /etc/hostname}
  - tool: echo
    retries: 2
    backoff: 10ms
`)
	assert.Equal(t, "nightly", d.TaskName)
	events := ts.events(d.SessionID)

	first := dev.nextCommand()
	require.Len(t, first.Actions, 1)
	assert.Equal(t, "hash_file", first.Actions[0].ToolName, "the namespace is checked, not sent")
	assert.Equal(t, protocol.ToolDataCollection, first.Actions[0].ToolType, "the inventory's tool_type is sent")
	assert.Equal(t, map[string]any{"path": "/etc/hostname"}, first.Actions[0].Parameters)
	assert.Equal(t, d.SessionID, first.SessionID)
	dev.answer(first, protocol.ResultSuccess, "")

	// The second step fails once, then succeeds on its retry.
	try1 := dev.nextCommand()
	dev.answer(try1, protocol.ResultFailure, "")
	try2 := dev.nextCommand()
	assert.NotEqual(t, try1.ResponseID, try2.ResponseID, "each attempt is a command of its own")
	assert.Empty(t, try2.Actions[0].ToolType, "a bare tool name is sent as is")
	dev.answer(try2, protocol.ResultSuccess, "")

	task := ts.waitTask(d.SessionID)
	assert.Equal(t, api.StateCompleted, task.State, task.Error)
	r := planResult(t, task)
	require.Len(t, r.Steps, 2)
	assert.Equal(t, api.StepResult{Step: 0, Tool: "stock.hash_file", Status: api.StepSuccess, Attempts: 1, ResponseID: first.ResponseID,
		Results: []protocol.Result{{Status: protocol.ResultSuccess, Result: map[string]any{"ran": "hash_file"}, CallID: first.Actions[0].CallID}}}, r.Steps[0])
	assert.Equal(t, 2, r.Steps[1].Attempts)
	assert.Equal(t, try2.ResponseID, r.Steps[1].ResponseID)
	require.Len(t, task.Commands, 3)

	var kinds []string
	for _, e := range <-events {
		kinds = append(kinds, e.Type)
		if e.Type != api.EventEnd {
			assert.Equal(t, 2, e.Steps, "%s says how many steps", e.Type)
			assert.NotEmpty(t, e.Tool, "%s says which tool", e.Type)
			assert.NotNil(t, e.Step, "%s says which step", e.Type)
		}
	}
	assert.Equal(t, []string{"step_start", "step_end", "step_start", "step_end", "step_start", "step_end", "end"}, kinds)

	res := api.TaskResult{}
	require.NoError(t, ts.api.Do(context.Background(), "GET", "/api/task_result/nightly", nil, &res))
	assert.Equal(t, "done", res.Status)
	assert.JSONEq(t, string(task.Result), string(res.Result))

	assert.Regexp(t, `msg="command sent" device=kiosk-1 session_id=`+d.SessionID+` response_id=`+first.ResponseID+` call_id=`+first.Actions[0].CallID,
		ts.logs.String(), "a command's log lines name its device, session, response_id and call_id")

	var audit []api.AuditEntry
	require.NoError(t, ts.api.Do(context.Background(), "GET", "/api/audit?session="+d.SessionID, nil, &audit))
	require.Len(t, audit, 3)
	assert.Equal(t, "data_collection::hash_file", audit[0].Tool)
	assert.Equal(t, "stock", audit[0].Namespace)
	assert.Equal(t, "sha-of-hash_file", audit[0].ModuleSHA256)
	assert.Equal(t, "operator", audit[0].Actor)
	assert.JSONEq(t, `{"path": "/etc/hostname"}`, string(audit[0].Parameters))
}

func TestAYAMLDateParameterIsSentStoredAndAuditedAsTheStringWritten(t *testing.T) {
	ts := newTestServer(t)
	for _, enc := range []protocol.Encoding{protocol.CBOR, protocol.JSON} {
		id := "kiosk-" + enc.String()
		dev, err := ts.dialWire(ts.enroll(id), enc)
		require.NoError(t, err)
		dev.register(id)
		d := dispatchPlan(t, ts, id, `steps: [{tool: write_file, tool_type: action, parameters: {content: 2024-01-01}}]`)

		cmd := dev.nextCommand()
		assert.Equal(t, map[string]any{"content": "2024-01-01"}, cmd.Actions[0].Parameters, "sent on %s", enc)
		dev.answer(cmd, protocol.ResultSuccess, "")
		task := ts.waitTask(d.SessionID)
		assert.JSONEq(t, `{"steps": [{"tool": "write_file", "tool_type": "action", "parameters": {"content": "2024-01-01"}}]}`,
			string(task.Plan), "stored")
		var audit []api.AuditEntry
		require.NoError(t, ts.api.Do(context.Background(), "GET", "/api/audit?session="+d.SessionID, nil, &audit))
		require.Len(t, audit, 1)
		assert.JSONEq(t, `{"content": "2024-01-01"}`, string(audit[0].Parameters), "audited")
	}
}

// events subscribes to a task's events and delivers them all once the
// stream ends.
func (ts *testServer) events(sessionID string) <-chan []api.TaskEvent {
	ts.t.Helper()
	req, _ := http.NewRequest("GET", ts.http.URL+"/api/tasks/"+sessionID+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+ts.api.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(ts.t, err)
	require.Equal(ts.t, http.StatusOK, resp.StatusCode)
	require.Equal(ts.t, "text/event-stream", resp.Header.Get("Content-Type"))
	out := make(chan []api.TaskEvent, 1)
	go func() {
		defer resp.Body.Close()
		var all []api.TaskEvent
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var e api.TaskEvent
				if json.Unmarshal([]byte(data), &e) == nil {
					all = append(all, e)
				}
			}
		}
		out <- all
	}()
	return out
}

func TestEarlyExitSkipsTheRestUnlessTheStepSaysOtherwise(t *testing.T) {
	ts := newTestServer(t)
	echo, hash := tool("stock", "echo", protocol.ToolAction), tool("stock", "hash_file", protocol.ToolDataCollection)
	dev := ts.device("kiosk-1", echo, hash)
	d := dispatchPlan(t, ts, "kiosk-1", `steps: [{tool: echo}, {tool: stock.hash_file}, {tool: echo}]`)
	first := dev.nextCommand()
	// The device loses a tool after the plan was admitted: the step that
	// uses it fails as it resolves, and nothing more is sent.
	dev.register("kiosk-1", echo)
	dev.answer(first, protocol.ResultSuccess, "")
	task := ts.waitTask(d.SessionID)
	assert.Equal(t, api.StateFailed, task.State)
	assert.Equal(t, `step 2 (stock.hash_file) failed: device "kiosk-1" has no tool "stock.hash_file"`, task.Error)
	r := planResult(t, task)
	assert.Equal(t, api.StepSkipped, r.Steps[2].Status)
	assert.Len(t, task.Commands, 1, "nothing was sent for the step that failed")

	d = dispatchPlan(t, ts, "kiosk-1", `steps: [{tool: echo, early_exit: false}, {tool: echo}]`)
	dev.answer(dev.nextCommand(), protocol.ResultFailure, "")
	dev.answer(dev.nextCommand(), protocol.ResultSuccess, "")
	task = ts.waitTask(d.SessionID)
	assert.Equal(t, api.StateFailed, task.State, "a failed step fails the task even when the plan goes on")
	r = planResult(t, task)
	assert.Equal(t, api.StepFailure, r.Steps[0].Status)
	assert.Equal(t, api.StepSuccess, r.Steps[1].Status)
}

func TestCancellingOnRequestTellsTheRequesterAndStillRecordsLateResults(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1")
	con := ts.constellation("orch-1", "kiosk-1")
	con.task("s1", "", `steps: [{tool: spin, timeout: 1m}, {tool: echo}]`)
	cmd := dev.nextCommand()

	task, err := ts.api.CancelTask(context.Background(), "s1")
	require.NoError(t, err)
	assert.Equal(t, api.StateCancelled, task.State)
	assert.Equal(t, "task cancelled on request", task.Error)
	end := con.recvType(protocol.ServerTaskEnd)
	assert.Equal(t, protocol.StatusFailed, end.Status)
	assert.Equal(t, "task cancelled on request", end.Error)
	r := planResult(t, task)
	assert.Equal(t, api.StepSkipped, r.Steps[1].Status)

	// Its device is asked to stop the command it runs, naming who asked.
	stop := dev.recvType(protocol.ServerCancelCommand)
	assert.Equal(t, cmd.ResponseID, stop.ResponseID)
	assert.Equal(t, "cancelled by admin", stop.Error)

	// The device finishes the command anyway: its results are recorded.
	dev.answer(cmd, protocol.ResultSuccess, "late-1")
	dev.ackOf("late-1")
	task, err = ts.api.Task(context.Background(), "s1")
	require.NoError(t, err)
	require.Len(t, task.Commands, 1)
	assert.Equal(t, "done", task.Commands[0].Status)
	assert.Equal(t, api.StateCancelled, task.State, "the task's outcome stands")

	code, msg := ts.apiStatus("POST", "/api/tasks/s1/cancel", nil)
	assert.Equal(t, http.StatusConflict, code)
	assert.Contains(t, msg, "it is cancelled")
}

func TestACancelledTasksRunningStepGetsItsGraceToFinish(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1")
	d := dispatchPlan(t, ts, "kiosk-1", `steps: [{tool: spin, timeout: 1m}]`)
	cmd := dev.nextCommand()

	cancelled := make(chan api.Task, 1)
	go func() {
		task, err := ts.api.CancelTask(context.Background(), d.SessionID)
		assert.NoError(t, err)
		cancelled <- task
	}()
	time.Sleep(200 * time.Millisecond) // the cancel is in, its grace running
	dev.answer(cmd, protocol.ResultSuccess, "")
	task := <-cancelled
	assert.Equal(t, api.StateCompleted, task.State, "the step finished within its %s grace", tasks.CancelGrace)
	assert.Equal(t, api.StepSuccess, planResult(t, task).Steps[0].Status)
}

func TestAConstellationThatLeavesHasItsSessionsCancelledWithoutTaskEnd(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1")
	con := ts.constellation("orch-1", "kiosk-1")
	con.task("s1", "", `steps: [{tool: spin}]`)
	dev.nextCommand()
	con.conn.CloseNow()

	task := ts.waitTask("s1")
	assert.Equal(t, api.StateCancelled, task.State)
	assert.Equal(t, "task cancelled: the client that asked for it disconnected", task.Error)
	assert.Contains(t, ts.logs.String(), "reason=constellation_disconnected")
	assert.NotContains(t, ts.logs.String(), "task_end not delivered", "no TASK_END was attempted")
}

func TestADeviceThatDoesNotComeBackHasItsSessionsCancelledWithTaskEnd(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Sessions.DeviceGrace = 100 * time.Millisecond })
	dev := ts.device("kiosk-1")
	con := ts.constellation("orch-1", "kiosk-1")
	con.task("s1", "", `steps: [{tool: spin, timeout: 1m}]`)
	dev.nextCommand()
	dev.conn.CloseNow()

	end := con.recvType(protocol.ServerTaskEnd)
	assert.Equal(t, protocol.StatusFailed, end.Status)
	assert.Equal(t, `task cancelled: target device "kiosk-1" disconnected`, end.Error)
	assert.Equal(t, api.StateCancelled, ts.waitTask("s1").State)
}

func TestATaskEndTooBigForAFrameComesWithoutTheStepsResults(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1")
	con := ts.constellation("orch-1", "kiosk-1")
	con.task("s1", "big-dump", `steps: [{tool: dump}, {tool: dump}]`)
	// Each answer fits in a frame; the two together do not.
	bulk := strings.Repeat("x", 5<<19)
	for range 2 {
		res := dev.results(dev.nextCommand(), protocol.ResultSuccess, "")
		res.ActionResults[0].Result = bulk
		dev.send(*res)
	}

	end := con.recvType(protocol.ServerTaskEnd)
	assert.Equal(t, protocol.StatusCompleted, end.Status)
	assert.Equal(t, "s1", end.SessionID)
	raw, err := json.Marshal(end.Result)
	require.NoError(t, err)
	var short api.PlanResult
	require.NoError(t, json.Unmarshal(raw, &short), string(raw))
	require.Len(t, short.Steps, 2)
	for _, st := range short.Steps {
		assert.Equal(t, api.StepSuccess, st.Status)
		assert.NotEmpty(t, st.ResponseID)
		assert.Nil(t, st.Results)
	}
	assert.Contains(t, short.ResultsOmitted, "GET /api/tasks/s1 or /api/task_result/big-dump has them whole")

	whole := planResult(t, ts.waitTask("s1"))
	require.Len(t, whole.Steps, 2)
	for _, st := range whole.Steps {
		require.Len(t, st.Results, 1)
		assert.Equal(t, bulk, st.Results[0].Result, "the stored result is whole")
	}
	assert.Empty(t, whole.ResultsOmitted)
}

func TestASingleCommandEndsAsDeviceDisconnectedWhenItsDeviceDoesNotComeBack(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Sessions.DeviceGrace = 100 * time.Millisecond })
	token := ts.enroll("kiosk-1")
	dev := ts.mustDial(token)
	dev.register("kiosk-1")
	done := make(chan api.CommandResponse, 1)
	go func() {
		resp, err := ts.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "spin"}}, Timeout: "10s"})
		assert.NoError(t, err)
		done <- resp
	}()
	dev.nextCommand()
	dev.conn.CloseNow()

	resp := <-done
	assert.Equal(t, `stopped waiting: task cancelled: target device "kiosk-1" disconnected`, resp.FirstError(), "not the 10s timeout")
	task := ts.waitTask(resp.SessionID)
	assert.Equal(t, api.StateCancelled, task.State)
	assert.Equal(t, `task cancelled: target device "kiosk-1" disconnected`, task.Error)
	assert.Contains(t, ts.logs.String(), "reason=device_disconnected")

	// Back after its grace, the device is not sent the cancelled task's
	// command again: the line is logged in place of the send.
	back := ts.mustDial(token)
	back.register("kiosk-1")
	require.Eventually(t, func() bool {
		return strings.Contains(ts.logs.String(), "command not sent again: its device came back after its grace")
	}, 10*time.Second, 10*time.Millisecond)
}

func TestADeviceThatComesBackGetsItsPendingCommandAgain(t *testing.T) {
	ts := newTestServer(t)
	token := ts.enroll("kiosk-1")
	dev := ts.mustDial(token)
	dev.register("kiosk-1")
	d := dispatchPlan(t, ts, "kiosk-1", `steps: [{tool: echo, timeout: 1m}]`)
	first := dev.nextCommand()
	dev.conn.CloseNow()

	again := ts.mustDial(token)
	again.register("kiosk-1")
	resent := again.recvType(protocol.ServerCommand)
	assert.Equal(t, first.ResponseID, resent.ResponseID)
	assert.Equal(t, first.SessionID, resent.SessionID)
	assert.Equal(t, first.Actions, resent.Actions, "same call_ids")
	again.answer(resent, protocol.ResultSuccess, "")
	assert.Equal(t, api.StateCompleted, ts.waitTask(d.SessionID).State)
}

// waitOffline waits until the server has noticed that every device's link
// dropped.
func (ts *testServer) waitOffline() {
	ts.t.Helper()
	require.Eventually(ts.t, func() bool { return len(ts.srv.reg.IDs()) == 0 }, 10*time.Second, 10*time.Millisecond, "the dropped link was never noticed")
}

// waitLog waits until the server's log says want.
func (ts *testServer) waitLog(want string) {
	ts.t.Helper()
	require.Eventually(ts.t, func() bool { return strings.Contains(ts.logs.String(), want) }, 10*time.Second, 10*time.Millisecond, "never logged: %s", want)
}

func TestARetryThatStartsWhileItsDeviceReconnectsWaitsForIt(t *testing.T) {
	ts := newTestServer(t)
	token := ts.enroll("kiosk-1")
	echo := tool("stock", "echo", protocol.ToolAction)
	dev := ts.mustDial(token)
	dev.register("kiosk-1", echo)
	d := dispatchPlan(t, ts, "kiosk-1", `steps: [{tool: stock.echo, retries: 1, backoff: 1s, timeout: 1m}]`)
	first := dev.nextCommand()
	dev.answer(first, protocol.ResultFailure, "r1")
	dev.ackOf("r1")
	// The link drops during the backoff: the retry starts while the
	// device is away, and waits for it.
	dev.conn.CloseNow()
	ts.waitOffline()
	ts.waitLog("device is offline; the command waits for it to register again")

	again := ts.mustDial(token)
	again.register("kiosk-1", echo)
	retry := again.nextCommand()
	assert.NotEqual(t, first.ResponseID, retry.ResponseID)
	assert.Equal(t, protocol.ToolAction, retry.Actions[0].ToolType, "stock.echo resolved from the last inventory")
	again.answer(retry, protocol.ResultSuccess, "")
	task := ts.waitTask(d.SessionID)
	assert.Equal(t, api.StateCompleted, task.State, task.Error)
	assert.Equal(t, 2, planResult(t, task).Steps[0].Attempts)
}

func TestACommandForADeviceInItsGraceWaitsForItToComeBack(t *testing.T) {
	ts := newTestServer(t)
	token := ts.enroll("kiosk-1")
	dev := ts.mustDial(token)
	dev.register("kiosk-1")
	dev.conn.CloseNow()
	ts.waitOffline()

	done := make(chan api.CommandResponse, 1)
	go func() {
		resp, err := ts.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "1m"})
		assert.NoError(t, err)
		done <- resp
	}()
	ts.waitLog("device is offline; the command waits for it to register again")
	again := ts.mustDial(token)
	again.register("kiosk-1")
	again.answer(again.nextCommand(), protocol.ResultSuccess, "")
	resp := <-done
	assert.True(t, resp.Succeeded(), resp.FirstError())
}

func TestACommandWaitingForItsDeviceFailsWhenTheGraceEndsAndIsNeverSent(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Sessions.DeviceGrace = time.Second })
	token := ts.enroll("kiosk-1")
	dev := ts.mustDial(token)
	dev.register("kiosk-1")
	dev.conn.CloseNow()
	ts.waitOffline()
	command := func() api.CommandResponse {
		resp, err := ts.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "1m"})
		require.NoError(t, err)
		return resp
	}

	resp := command()
	assert.Equal(t, `device "kiosk-1" is offline and did not register again within its grace`, resp.FirstError())
	resp = command()
	assert.Equal(t, `device "kiosk-1" is offline`, resp.FirstError(), "past its grace: at once")
	again := ts.mustDial(token)
	again.register("kiosk-1")
	again.ping() // and no command came first
}

func TestTheSessionLimitAnswers503WithTheCount(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Sessions.MaxSessions = 1 })
	dev := ts.device("kiosk-1")
	d := dispatchPlan(t, ts, "kiosk-1", `steps: [{tool: spin}]`)
	cmd := dev.nextCommand()

	err := ts.api.Do(context.Background(), "POST", "/api/dispatch", api.DispatchRequest{ClientID: "kiosk-1", Request: echoPlan}, nil)
	var se *api.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusServiceUnavailable, se.Code)
	assert.Equal(t, "session limit reached: 1 sessions running (limit 1)", se.Message)
	var body api.Error
	req, _ := http.NewRequest("POST", ts.http.URL+"/api/devices/kiosk-1/commands", strings.NewReader(`{"actions":[{"tool_name":"echo"}]}`))
	req.Header.Set("X-API-Key", ts.api.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, 1, body.Sessions)

	dev.answer(cmd, protocol.ResultSuccess, "")
	ts.waitTask(d.SessionID)
	dispatchPlan(t, ts, "kiosk-1", echoPlan) // room again
}

func TestResultsExpireAfterTheirTTLButTheAuditLogStays(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Sessions.ResultTTL = 50 * time.Millisecond })
	ts.device("kiosk-1").serveOK()
	resp, err := ts.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
	require.NoError(t, err)
	require.True(t, resp.Succeeded())
	require.Eventually(t, func() bool {
		code, _ := ts.apiStatus("GET", "/api/tasks/"+resp.SessionID, nil)
		return code == http.StatusNotFound
	}, 10*time.Second, 10*time.Millisecond)
	var audit []api.AuditEntry
	require.NoError(t, ts.api.Do(context.Background(), "GET", "/api/audit?session="+resp.SessionID, nil, &audit))
	assert.Len(t, audit, 1)
}

func TestAFailingCallbackDoesNotFailTheSession(t *testing.T) {
	ts := newTestServer(t)
	ts.device("kiosk-1").serveOK()
	p, err := plan.Parse([]byte(echoPlan))
	require.NoError(t, err)
	called := make(chan *protocol.ServerMessage, 1)
	_, err = ts.srv.tasks.StartPlan(context.Background(), tasks.PlanTask{Asker: tasks.Asker{Who: testAdmin, Kind: api.RequesterOperator},
		Device: "kiosk-1", Plan: p, ID: "s1",
		TaskEnd: func(msg *protocol.ServerMessage) error {
			called <- msg
			return errors.New("requester vanished")
		}})
	require.NoError(t, err)
	msg := <-called
	assert.Equal(t, protocol.ServerTaskEnd, msg.Type)
	assert.Equal(t, protocol.StatusCompleted, msg.Status)
	assert.Equal(t, api.StateCompleted, ts.waitTask("s1").State)
	assert.Eventually(t, func() bool { return strings.Contains(ts.logs.String(), "requester vanished") }, 5*time.Second, 10*time.Millisecond)
}

func TestRevokingADeviceFailsItsCommandsAndCancelsItsSessionsAtOnce(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1")
	con := ts.constellation("orch-1", "kiosk-1")
	con.task("s1", "", `steps: [{tool: spin, timeout: 1m}]`)
	cmd := dev.nextCommand()

	code, _ := ts.apiStatus("DELETE", "/api/devices/kiosk-1", nil)
	require.Equal(t, http.StatusOK, code)
	end := con.recvType(protocol.ServerTaskEnd)
	assert.Equal(t, `task cancelled: target device "kiosk-1" disconnected`, end.Error)
	dev.requireClosed()
	task := ts.waitTask("s1")
	require.Len(t, task.Commands, 1)
	assert.Equal(t, cmd.ResponseID, task.Commands[0].ResponseID)
	assert.Equal(t, "failed", task.Commands[0].Status)
	assert.Equal(t, `device "kiosk-1" was revoked`, task.Commands[0].Error)
}

func TestADeadLinkIsNoticedAndItsCommandWaitsForTheDevice(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Conn.PingInterval = 50 * time.Millisecond })
	token := ts.enroll("kiosk-1")
	dev := ts.mustDial(token)
	dev.register("kiosk-1")
	d := dispatchPlan(t, ts, "kiosk-1", `steps: [{tool: echo, timeout: 1m}]`)
	dev.nextCommand()
	// The device stops reading: it answers no more pings, as a dead link.
	require.Eventually(t, func() bool { return len(ts.srv.reg.IDs()) == 0 }, 10*time.Second, 10*time.Millisecond, "the dead link was never noticed")
	assert.Contains(t, ts.logs.String(), "link dropped; the command waits for the device to come back")
	assert.True(t, ts.srv.tasks.Running(d.SessionID), "the task still runs, waiting")

	again := ts.mustDial(token)
	again.register("kiosk-1")
	again.answer(again.nextCommand(), protocol.ResultSuccess, "")
	assert.Equal(t, api.StateCompleted, ts.waitTask(d.SessionID).State)
}

func TestACommandTheDeviceRefusesFailsAtOnceWithItsReason(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1")
	other := ts.device("kiosk-2")
	done := make(chan api.CommandResponse, 1)
	go func() {
		resp, err := ts.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "1m"})
		assert.NoError(t, err)
		done <- resp
	}()
	cmd := dev.nextCommand()
	refusal := protocol.ClientMessage{Type: protocol.ClientError, Status: protocol.StatusError, PrevResponseID: cmd.ResponseID, Error: "malformed frame: too deep"}

	refusal.ClientID = "kiosk-2"
	other.send(refusal)
	select {
	case <-done:
		t.Fatal("another device's ERROR ended the command")
	case <-time.After(200 * time.Millisecond):
	}

	refusal.ClientID = "kiosk-1"
	dev.send(refusal)
	resp := <-done
	assert.Equal(t, `device "kiosk-1" refused the command: malformed frame: too deep`, resp.FirstError(), "at once, not at the 1m timeout")

	ids := ` session_id=` + resp.SessionID + ` response_id=` + cmd.ResponseID + ` call_id=` + cmd.Actions[0].CallID
	assert.Regexp(t, `msg="device reported an error about a command not waiting on it" device=kiosk-2`+ids, ts.logs.String(),
		"the command's ids, from the store")
	assert.Regexp(t, `msg="device refused the command" device=kiosk-1`+ids, ts.logs.String())
}
