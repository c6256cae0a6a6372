package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDispatchChecksWhatUFOChecksInUFOsOrder(t *testing.T) {
	ts := newTestServer(t)
	ts.device("kiosk-1")
	for _, tc := range []struct {
		name string
		body any
		code int
		msg  string
	}{
		// Each case also fails every check after its own.
		{"empty content", map[string]any{"client_id": "", "task_name": "../x"}, 400, "Empty task content"},
		{"empty client id", api.DispatchRequest{Request: echoPlan, TaskName: "../x"}, 400, "Empty client ID"},
		{"unsafe task name", api.DispatchRequest{Request: echoPlan, ClientID: "nobody", TaskName: ".x"}, 400, "Invalid task_name"},
		{"client not online", api.DispatchRequest{Request: "not a plan", ClientID: "nobody"}, 404, "Client not online"},
		{"request is not a plan", api.DispatchRequest{Request: "open the pod bay doors", ClientID: "kiosk-1"}, 400, `field "request": not a plan`},
		{"bad plan", api.DispatchRequest{Plan: json.RawMessage(`{"steps": []}`), ClientID: "kiosk-1"}, 400, `field "plan": plan: line 1, column 2: steps: at least one step is required`},
		{"both", api.DispatchRequest{Request: echoPlan, Plan: json.RawMessage(`"steps: [{tool: a}]"`), ClientID: "kiosk-1"}, 400, "not both"},
		// UFO's handler reads the keys it needs from a dict and ignores
		// the rest: so does this one, after the same checks.
		{"unknown field, empty content", map[string]any{"client_id": "kiosk-1", "extra": true}, 400, "Empty task content"},
		{"unknown field", map[string]any{"client_id": "kiosk-1", "request": echoPlan, "extra": map[string]any{"priority": 1}}, 200, ""},
	} {
		code, msg := ts.apiStatus("POST", "/api/dispatch", tc.body)
		assert.Equal(t, tc.code, code, tc.name)
		assert.Contains(t, msg, tc.msg, tc.name)
	}
}

func TestDispatchTakesAPlanAsTextOrObjectAndTaskResultWaitsForIt(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1")
	ctx := context.Background()
	var res api.TaskResult
	require.NoError(t, ts.api.Do(ctx, "GET", "/api/task_result/never-dispatched", nil, &res))
	assert.Equal(t, "pending", res.Status, "as UFO answers for a task it does not know")

	for name, p := range map[string]json.RawMessage{
		"object": json.RawMessage(`{"task_name": "from-object", "steps": [{"tool": "echo"}]}`),
		"text":   json.RawMessage(`"task_name: from-text\nsteps: [{tool: echo}]"`),
	} {
		d, err := ts.api.Dispatch(ctx, api.DispatchRequest{ClientID: "kiosk-1", Plan: p})
		require.NoError(t, err, name)
		assert.Equal(t, "kiosk-1", d.ClientID)
		cmd := dev.nextCommand()
		res = api.TaskResult{}
		require.NoError(t, ts.api.Do(ctx, "GET", "/api/task_result/"+d.TaskName, nil, &res))
		assert.Equal(t, api.TaskResult{Status: "pending", SessionID: d.SessionID, State: api.StateRunning}, res, name)
		dev.answer(cmd, protocol.ResultSuccess, "")
		ts.waitTask(d.SessionID)
		res = api.TaskResult{}
		require.NoError(t, ts.api.Do(ctx, "GET", "/api/task_result/"+d.TaskName, nil, &res))
		assert.Equal(t, "done", res.Status, name)
		assert.Equal(t, d.SessionID, res.SessionID, "the task the name maps to")
		assert.Equal(t, api.StateCompleted, res.State)
		assert.Contains(t, string(res.Result), `"status":"success"`)
	}
	// A dispatch's task_name wins over the plan's; without either, one is made.
	d, err := ts.api.Dispatch(ctx, api.DispatchRequest{ClientID: "kiosk-1", Request: "task_name: inner\nsteps: [{tool: echo}]", TaskName: "outer"})
	require.NoError(t, err)
	assert.Equal(t, "outer", d.TaskName)
	dev.answer(dev.nextCommand(), protocol.ResultSuccess, "")
	d, err = ts.api.Dispatch(ctx, api.DispatchRequest{ClientID: "kiosk-1", Request: echoPlan})
	require.NoError(t, err)
	assert.Len(t, d.TaskName, 36)
}

func TestClientsAndHealth(t *testing.T) {
	ts := newTestServer(t)
	ts.device("kiosk-1")
	ts.constellation("orch-1", "kiosk-1")
	var clients api.Clients
	require.NoError(t, ts.api.Do(context.Background(), "GET", "/api/clients", nil, &clients))
	assert.Equal(t, []string{"kiosk-1", "orch-1"}, clients.OnlineClients)

	var h api.Health
	require.NoError(t, ts.api.Do(context.Background(), "GET", "/api/health", nil, &h))
	assert.Equal(t, api.Health{Status: "healthy", OnlineClients: []string{"kiosk-1", "orch-1"}}, h)
	resp, err := http.Get(ts.http.URL + "/api/health")
	require.NoError(t, err)
	defer resp.Body.Close()
	h = api.Health{}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
	assert.Equal(t, api.Health{Status: "healthy"}, h, "without the token, no client ids")

	code, _ := ts.apiStatus("GET", "/api/tasks?state=sleeping", nil)
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = ts.apiStatus("GET", "/api/tasks?limit=0", nil)
	assert.Equal(t, http.StatusBadRequest, code)
}

func TestListTasksAndRemoveATask(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1")
	ctx := context.Background()
	done := dispatchPlan(t, ts, "kiosk-1", echoPlan)
	dev.answer(dev.nextCommand(), protocol.ResultSuccess, "")
	ts.waitTask(done.SessionID)
	running := dispatchPlan(t, ts, "kiosk-1", echoPlan)
	dev.nextCommand()

	tasks, err := ts.api.Tasks(ctx, api.StateRunning, 0)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, running.SessionID, tasks[0].SessionID)
	tasks, err = ts.api.Tasks(ctx, "", 0)
	require.NoError(t, err)
	assert.Len(t, tasks, 2)
	tasks, err = ts.api.Tasks(ctx, "", 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1, "limit")
	assert.Equal(t, running.SessionID, tasks[0].SessionID, "newest first")
	named, err := ts.api.TaskPage(ctx, api.TaskQuery{TaskName: done.TaskName})
	require.NoError(t, err)
	require.Len(t, named.Tasks, 1, "only the task of that name")
	assert.Equal(t, done.SessionID, named.Tasks[0].SessionID)
	code, _ := ts.apiStatus("GET", "/api/tasks?task_name=.env", nil)
	assert.Equal(t, http.StatusBadRequest, code)

	code, _ = ts.apiStatus("DELETE", "/api/tasks/"+running.SessionID, nil)
	assert.Equal(t, http.StatusConflict, code)
	events := <-ts.events(done.SessionID)
	require.Len(t, events, 3, "a task that ended lately replays all its events")
	assert.Equal(t, []string{api.EventStepStart, api.EventStepEnd, api.EventEnd}, []string{events[0].Type, events[1].Type, events[2].Type})
	end := events[2]
	assert.Equal(t, api.TaskEvent{Type: api.EventEnd, SessionID: done.SessionID, DeviceID: "kiosk-1", State: api.StateCompleted, Status: "completed",
		Result: end.Result, Time: end.Time}, end)
	assert.NotNil(t, end.Result)

	code, _ = ts.apiStatus("DELETE", "/api/tasks/"+done.SessionID, nil)
	assert.Equal(t, http.StatusOK, code)
	code, _ = ts.apiStatus("GET", "/api/tasks/"+done.SessionID, nil)
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = ts.apiStatus("GET", "/api/tasks/"+done.SessionID+"/events", nil)
	assert.Equal(t, http.StatusNotFound, code)
}

func TestEveryRouteButTheOpenOnesNeedsTheOperatorToken(t *testing.T) {
	ts := newTestServer(t)
	for _, rt := range ts.srv.http.Routes() {
		if rt.Undocumented != "" {
			continue // the WebSocket, the dashboard, Go's profiles: tests of their own
		}
		path := strings.NewReplacer("{id}", "x", "{task_name}", "x", "{name}", "x", "{token_id}", "x").Replace(rt.Pattern)
		req, _ := http.NewRequest(rt.Method, ts.http.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		ru, _ := identity.RuleFor(rt.Policy)
		switch {
		case ru.Public && rt.Method == "POST":
			// The login endpoints: a missing body is a bad request, not a
			// missing token; they have tests of their own.
			assert.NotEqual(t, http.StatusUnauthorized, resp.StatusCode, "%s %s", rt.Method, rt.Pattern)
		case ru.Public:
			assert.Equal(t, http.StatusOK, resp.StatusCode, "%s %s", rt.Method, rt.Pattern)
		default:
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s %s", rt.Method, rt.Pattern)
		}
	}
}

func TestTasksAreListedAsSummariesPageByPage(t *testing.T) {
	ts := newTestServer(t)
	ts.device("kiosk-1").serveOK()
	ctx := context.Background()
	var ids []string
	for range 7 {
		resp, err := ts.api.Command(ctx, "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
		require.NoError(t, err)
		ids = append([]string{resp.SessionID}, ids...) // newest first
	}

	var listed []string
	cursor, pages := "", 0
	for {
		var raw json.RawMessage
		require.NoError(t, ts.api.Do(ctx, "GET", "/api/tasks?limit=3&cursor="+url.QueryEscape(cursor), nil, &raw))
		assert.NotContains(t, string(raw), `"result"`, "summaries: no results")
		assert.NotContains(t, string(raw), `"plan"`, "summaries: no plans")
		var page api.TaskPage
		require.NoError(t, json.Unmarshal(raw, &page))
		pages++
		assert.LessOrEqual(t, len(page.Tasks), 3)
		for _, s := range page.Tasks {
			listed = append(listed, s.SessionID)
			assert.Equal(t, api.StateCompleted, s.State)
			assert.Equal(t, api.KindCommand, s.Kind)
			assert.NotNil(t, s.FinishedAt)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	assert.Equal(t, ids, listed, "every task once, newest first")
	assert.Equal(t, 3, pages)

	all, err := ts.api.Tasks(ctx, "", 5)
	require.NoError(t, err)
	require.Len(t, all, 5, "the client follows the pages up to its limit")
	assert.Equal(t, ids[:5], []string{all[0].SessionID, all[1].SessionID, all[2].SessionID, all[3].SessionID, all[4].SessionID})

	for _, q := range []string{"limit=501", "limit=0", "cursor=nonsense", "cursor=" + url.QueryEscape(`["2026-01-01T00:00:00Z"]`)} {
		code, msg := ts.apiStatus("GET", "/api/tasks?"+q, nil)
		assert.Equal(t, http.StatusBadRequest, code, q)
		assert.NotEmpty(t, msg)
	}
}
