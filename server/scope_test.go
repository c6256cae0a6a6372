package server

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lobbyAndDepot enrolls lobby-1, lobby-2 (site=lobby) and depot-1
// (site=depot), each answering every command, with tools echo (action)
// and read_file (data_collection).
func lobbyAndDepot(ts *testServer) map[string]*rawClient {
	ts.t.Helper()
	devs := map[string]*rawClient{}
	for id, site := range map[string]string{"lobby-1": "lobby", "lobby-2": "lobby", "depot-1": "depot"} {
		resp, err := ts.api.Enroll(context.Background(), api.EnrollRequest{ID: id, Labels: map[string]string{"site": site}})
		require.NoError(ts.t, err)
		dev := ts.mustDial(resp.Token)
		dev.register(id, tool("stock", "echo", protocol.ToolAction), tool("stock", "read_file", protocol.ToolDataCollection))
		dev.serveOK()
		devs[id] = dev
	}
	return devs
}

func deviceIDs(devs []api.Device) []string {
	var out []string
	for _, d := range devs {
		out = append(out, d.ID)
	}
	return out
}

func TestAScopedIdentitySeesOnlyItsDevicesAndToolsInEveryList(t *testing.T) {
	ts := newTestServer(t)
	lobbyAndDepot(ts)
	ctx := context.Background()
	viewer := ts.as(ts.addIdentity("lobby-reader", api.RoleViewer, &api.Scope{Devices: "site=lobby", Tools: []string{"data_collection::*"}}))
	op := ts.as(ts.addIdentity("lobby-op", api.RoleOperator, &api.Scope{Devices: "site=lobby"}))
	ts.constellationAs(ts.api.Token, "orch-depot", "depot-1")
	ts.constellationAs(ts.api.Token, "orch-lobby", "lobby-1")
	for _, id := range []string{"lobby-1", "depot-1"} {
		_, err := ts.api.Command(ctx, id, api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
		require.NoError(t, err)
	}

	devs, err := viewer.Devices(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"lobby-1", "lobby-2"}, deviceIDs(devs))
	for _, d := range devs {
		require.NotNil(t, d.Info)
		require.Len(t, d.Info.Tools, 1, "only the tools its scope allows")
		assert.Equal(t, "read_file", d.Info.Tools[0].ToolName)
	}
	tools, err := viewer.DeviceTools(ctx, "lobby-1")
	require.NoError(t, err)
	require.Len(t, tools, 1)
	assert.Equal(t, "read_file", tools[0].ToolName)
	tools, err = op.DeviceTools(ctx, "lobby-1")
	require.NoError(t, err)
	assert.Len(t, tools, 2, "no tool patterns: every tool")

	var clients api.Clients
	require.NoError(t, viewer.Do(ctx, "GET", "/api/clients", nil, &clients))
	assert.Equal(t, []string{"lobby-1", "lobby-2", "orch-lobby"}, clients.OnlineClients)
	var health api.Health
	require.NoError(t, viewer.Do(ctx, "GET", "/api/health", nil, &health))
	assert.Equal(t, clients.OnlineClients, health.OnlineClients)

	tasks, err := viewer.Tasks(ctx, "", 0)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	assert.Equal(t, "lobby-1", tasks[0].DeviceID)
	audit, err := viewer.Audit(ctx, api.AuditQuery{})
	require.NoError(t, err)
	require.NotEmpty(t, audit)
	for _, e := range audit {
		assert.Contains(t, []string{"lobby-1", "lobby-2"}, e.DeviceID, "entries about its devices alone: %+v", e)
	}
	audit, err = ts.api.Audit(ctx, api.AuditQuery{})
	require.NoError(t, err)
	assert.Greater(t, len(audit), 2, "the unscoped admin sees enrollments and both commands")
}

func TestAFleetMatchesOnlyTheDevicesInScopeAndIsSeenByScopesItImplies(t *testing.T) {
	ts := newTestServer(t)
	lobbyAndDepot(ts)
	ctx := context.Background()
	everywhere := ts.as(ts.addIdentity("everywhere", api.RoleOperator, nil))
	lobby := ts.as(ts.addIdentity("lobby-op", api.RoleOperator, &api.Scope{Devices: "site=lobby"}))
	depot := ts.as(ts.addIdentity("depot-viewer", api.RoleViewer, &api.Scope{Devices: "site=depot"}))

	f, err := lobby.Fleet(ctx, api.FleetRequest{Labels: map[string]string{"site": "lobby"}, Plan: []byte(`"steps: [{tool: echo}]"`)})
	require.NoError(t, err)
	assert.Equal(t, []string{"lobby-1", "lobby-2"}, f.Devices)
	ts.waitTask(f.SessionID)
	_, err = lobby.Fleet(ctx, api.FleetRequest{Labels: map[string]string{"site": "depot"}, Plan: []byte(`"steps: [{tool: echo}]"`)})
	requireStatus(t, err, http.StatusNotFound, "no enrolled device has the labels site=depot")

	_, err = everywhere.Fleet(ctx, api.FleetRequest{Labels: map[string]string{"role": "none"}, Plan: []byte(`"steps: [{tool: echo}]"`)})
	requireStatus(t, err, http.StatusNotFound, "")

	// The fleet ran with site=lobby: a lobby scope sees it and its
	// children, a depot scope sees neither.
	_, err = lobby.Task(ctx, f.SessionID)
	assert.NoError(t, err)
	_, err = depot.Task(ctx, f.SessionID)
	requireStatus(t, err, http.StatusNotFound, "no task")
	code, _ := ts.call(depot.Token, probeRequest{method: "GET", path: "/api/tasks/" + f.SessionID + "/events"})
	assert.Equal(t, http.StatusNotFound, code, "nor its event stream")
	listed, err := depot.Tasks(ctx, "", 0)
	require.NoError(t, err)
	assert.Empty(t, listed)
	listed, err = lobby.Tasks(ctx, "", 0)
	require.NoError(t, err)
	assert.Len(t, listed, 3, "the fleet and its two devices' tasks")

	// An unscoped admin's fleet is seen by the scopes its labels imply.
	wide, err := ts.api.Fleet(ctx, api.FleetRequest{Labels: map[string]string{"site": "depot"}, Plan: []byte(`"steps: [{tool: echo}]"`)})
	require.NoError(t, err)
	ts.waitTask(wide.SessionID)
	_, err = depot.Task(ctx, wide.SessionID)
	assert.NoError(t, err, "site=depot implies the depot scope")
	_, err = lobby.Task(ctx, wide.SessionID)
	requireStatus(t, err, http.StatusNotFound, "")
}

func requireStatus(t *testing.T, err error, code int, msg string) {
	t.Helper()
	var se *api.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, code, se.Code, se.Message)
	assert.Contains(t, se.Message, msg)
}

func TestAStepOutsideTheToolScopeIsRefusedByAdmissionBeforeAnythingRuns(t *testing.T) {
	ts := newTestServer(t)
	lobbyAndDepot(ts)
	ctx := context.Background()
	collector := ts.as(ts.addIdentity("collector", api.RoleOperator, &api.Scope{Tools: []string{"data_collection::*"}}))

	plan := "steps:\n  - tool: read_file\n  - tool: echo\n  - tool: stock.echo\n  - actions: [{tool_name: echo, tool_type: action}]\n"
	_, err := collector.Dispatch(ctx, api.DispatchRequest{ClientID: "lobby-1", Request: plan})
	var se *api.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusBadRequest, se.Code)
	var paths []string
	for _, p := range se.Problems {
		paths = append(paths, p.Path)
		assert.Equal(t, `device "lobby-1" has no tool "`+map[string]string{
			"steps[1].tool": "echo", "steps[2].tool": "stock.echo", "steps[3].actions[0].tool_name": "echo"}[p.Path]+`"`, p.Problem,
			"refused as a tool the device lacks")
	}
	assert.Equal(t, []string{"steps[1].tool", "steps[2].tool", "steps[3].actions[0].tool_name"}, paths)
	ts.requireNothingRecorded()

	// Through a constellation too: the TASK ends, failed, with the same
	// problem.
	con, _ := ts.constellationAs(collector.Token, "orch-1", "lobby-1")
	end := con.task("s-1", "t", "steps: [{tool: echo}]")
	assert.Equal(t, protocol.ServerTaskEnd, end.Type)
	assert.Contains(t, end.Error, `device "lobby-1" has no tool "echo"`)

	// What is in scope runs, named by its type so that the agent runs
	// exactly it.
	resp, err := collector.Command(ctx, "lobby-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "read_file"}}})
	require.NoError(t, err)
	assert.Equal(t, "success", resp.Status)
	task, err := ts.api.Task(ctx, resp.SessionID)
	require.NoError(t, err)
	require.Len(t, task.Commands, 1)
	assert.Equal(t, "collector", task.Requester.Identity)
	cmds, err := ts.srv.store.Commands().OfSession(ctx, resp.SessionID)
	require.NoError(t, err)
	assert.Equal(t, protocol.ToolDataCollection, cmds[0].Actions[0].ToolType, "the tool's type is pinned when it is sent")
}

func TestOnlyADeployerInstallsToolsAndAScopedOneOnlyToolsItsScopeAllows(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", tool("", protocol.InstallToolName, protocol.ToolAction), tool("stock", "echo", protocol.ToolAction))
	dev.serveOK()
	ctx := context.Background()
	module, err := os.ReadFile("../testdata/tools/signed/signed_echo.wasm") // its manifest names signed_echo, an action
	require.NoError(t, err)
	params, err := protocol.InstallToolParams(module, "")
	require.NoError(t, err)
	install := "steps:\n  - tool_name: install_tool\n    tool_type: action\n    parameters: {module: " + params["module"].(string) + ", sha256: " + params["sha256"].(string) + "}\n"

	op := ts.as(ts.addIdentity("op", api.RoleOperator, nil))
	_, err = op.Dispatch(ctx, api.DispatchRequest{ClientID: "kiosk-1", Request: install})
	requireStatus(t, err, http.StatusForbidden, `steps[0]: identity "op" has role operator: installing a tool needs deployer`)

	collectors := ts.as(ts.addIdentity("collectors", api.RoleDeployer, &api.Scope{Tools: []string{"data_collection::*"}}))
	_, err = collectors.DeployTool(ctx, "kiosk-1", module, "", time.Minute)
	requireStatus(t, err, http.StatusForbidden, `the module installs action::signed_echo, which identity "collectors"'s scope (tools data_collection::*) does not allow`)
	_, err = collectors.Dispatch(ctx, api.DispatchRequest{ClientID: "kiosk-1", Request: install})
	requireStatus(t, err, http.StatusForbidden, "action::signed_echo")
	_, err = collectors.DeployTool(ctx, "kiosk-1", []byte("\x00asm\x01\x00\x00\x00"), "", time.Minute)
	requireStatus(t, err, http.StatusForbidden, "the module's manifest cannot say which it is")

	echoers := ts.as(ts.addIdentity("echoers", api.RoleDeployer, &api.Scope{Tools: []string{"*echo"}}))
	resp, err := echoers.DeployTool(ctx, "kiosk-1", module, "", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, "success", resp.Status)
	d, err := echoers.Dispatch(ctx, api.DispatchRequest{ClientID: "kiosk-1", Request: install})
	require.NoError(t, err)
	assert.Equal(t, api.StateCompleted, ts.waitTask(d.SessionID).State)
}

func TestAScopedDashboardLoginAndEventStreamSeeOnlyTheScope(t *testing.T) {
	ts := newTestServer(t)
	lobbyAndDepot(ts)
	token := ts.addIdentity("lobby-viewer", api.RoleViewer, &api.Scope{Devices: "site=lobby"})
	b := &browser{t: t, client: http.DefaultClient, base: ts.http.URL}
	require.Equal(t, http.StatusOK, b.login(token).StatusCode)
	assert.Equal(t, http.StatusOK, b.do("GET", "/api/devices/lobby-1", "").StatusCode)
	assert.Equal(t, http.StatusNotFound, b.do("GET", "/api/devices/depot-1", "").StatusCode)
	assert.Equal(t, http.StatusForbidden, b.do("POST", "/api/devices/lobby-1/commands", `{"actions":[{"tool_name":"echo"}]}`,
		"Sec-Fetch-Site", "same-origin").StatusCode, "a viewer runs nothing, from the dashboard either")

	lobbyTask := dispatchPlan(t, ts, "lobby-1", echoPlan)
	depotTask := dispatchPlan(t, ts, "depot-1", echoPlan)
	ts.waitTask(lobbyTask.SessionID)
	ts.waitTask(depotTask.SessionID)
	assert.Equal(t, http.StatusOK, b.do("GET", "/api/tasks/"+lobbyTask.SessionID+"/events", "").StatusCode)
	assert.Equal(t, http.StatusNotFound, b.do("GET", "/api/tasks/"+depotTask.SessionID+"/events", "").StatusCode)
	assert.Equal(t, http.StatusForbidden, b.do("GET", "/metrics", "").StatusCode, "metrics cover the whole fleet")

	var me api.Caller
	require.NoError(t, ts.as(token).Do(context.Background(), "GET", "/api/whoami", nil, &me))
	assert.Equal(t, api.Caller{Name: "lobby-viewer", Role: api.RoleViewer, Scope: &api.Scope{Devices: "site=lobby"}, TokenID: me.TokenID}, me)
	assert.Len(t, me.TokenID, 16)
}

func TestAConstellationIsHeldToItsScopeWhenItsTargetChanges(t *testing.T) {
	ts := newTestServer(t)
	lobbyAndDepot(ts)
	ctx := context.Background()
	lobby := ts.addIdentity("lobby-op", api.RoleOperator, &api.Scope{Devices: "site=lobby"})
	con, _ := ts.constellationAs(lobby, "orch-1", "lobby-1")
	ack := con.task("s-1", "", echoPlan)
	require.Equal(t, protocol.ServerHeartbeat, ack.Type, "in scope, it runs")
	con.recvType(protocol.ServerTaskEnd)

	// The same id, enrolled again at another site.
	require.NoError(t, ts.api.Revoke(ctx, "lobby-1"))
	var resp api.EnrollResponse
	require.Eventually(t, func() bool { // once its old link has closed
		var err error
		resp, err = ts.api.Enroll(ctx, api.EnrollRequest{ID: "lobby-1", Labels: map[string]string{"site": "depot"}})
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	moved := ts.mustDial(resp.Token)
	moved.register("lobby-1", tool("stock", "echo", protocol.ToolAction))
	moved.serveOK()

	end := con.task("s-2", "", echoPlan)
	assert.Equal(t, protocol.ServerTaskEnd, end.Type)
	assert.Equal(t, `task: target device "lobby-1" is not connected`, end.Error)
	con.send(protocol.ClientMessage{Type: protocol.ClientDeviceInfoRequest, ClientID: "orch-1", RequestID: "info"})
	con.requireError(`target device "lobby-1" is not connected`)
	con.ping()
}

// Only a rollout stages modules and applies revisions on a device, and a
// revision only of itself: not an admin through the API, and not a
// rollout's health check naming another rollout.
func TestOnlyARolloutAppliesARevisionAndOnlyItsOwn(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", tool("computer", protocol.ApplyRevisionName, protocol.ToolAction), tool("computer", protocol.StageModuleName, protocol.ToolAction))
	dev.serveOK()
	apply := protocol.Command{ToolName: protocol.ApplyRevisionName, ToolType: protocol.ToolAction,
		Parameters: protocol.ApplyRevisionParams(protocol.Revision{Rollout: "kiosk-tools", Number: 2})}
	_, err := ts.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{apply}})
	requireStatus(t, err, http.StatusForbidden, "actions[0]: apply_revision is a rollout's own, for its own tools")

	for who, allowed := range map[string]bool{"kiosk-tools": true, "other": false} {
		_, err := ts.srv.tasks.AdmitCommand(tasks.CommandTask{Asker: tasks.Asker{Who: identity.RolloutCaller(who), Kind: api.RequesterRollout},
			Device: "kiosk-1", Actions: []protocol.Command{apply}})
		if allowed {
			assert.NoError(t, err, who)
		} else {
			assert.ErrorContains(t, err, "apply_revision is a rollout's own, for its own tools", who)
		}
	}
}

// A scoped identity that names a task outside its scope learns nothing of
// it, and cancels nothing: the task runs on.
func TestAScopedIdentityCannotCancelATaskOutsideItsScope(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	resp, err := ts.api.Enroll(ctx, api.EnrollRequest{ID: "depot-1", Labels: map[string]string{"site": "depot"}})
	require.NoError(t, err)
	dev := ts.mustDial(resp.Token) // it takes commands and never answers
	dev.register("depot-1", tool("stock", "echo", protocol.ToolAction))
	op := ts.as(ts.addIdentity("lobby-op", api.RoleOperator, &api.Scope{Devices: "site=lobby"}))
	d, err := ts.api.Dispatch(ctx, api.DispatchRequest{ClientID: "depot-1", Request: echoPlan})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		task, err := ts.api.Task(ctx, d.SessionID)
		return err == nil && task.State == api.StateRunning
	}, 10*time.Second, 5*time.Millisecond)

	_, err = op.CancelTask(ctx, d.SessionID)
	var apiErr *api.StatusError
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, http.StatusNotFound, apiErr.Code)
	task, err := ts.api.Task(ctx, d.SessionID)
	require.NoError(t, err)
	assert.Equal(t, api.StateRunning, task.State, "the task runs on")

	_, err = ts.api.CancelTask(ctx, d.SessionID)
	require.NoError(t, err, "its own identity cancels it")
}

// Only a rollout updates a device's agent: an admin through the API is
// refused each of the meta tools that do it.
func TestOnlyARolloutUpdatesAnAgent(t *testing.T) {
	ts := newTestServer(t)
	names := []string{protocol.StageReleaseName, protocol.ApplyReleaseName, protocol.EndTrialName, protocol.RevertReleaseName}
	var tools []protocol.MCPToolInfo
	for _, n := range names {
		tools = append(tools, tool("computer", n, protocol.ToolAction))
	}
	dev := ts.device("kiosk-1", tools...)
	dev.serveOK()
	for _, n := range names {
		cmd := protocol.Command{ToolName: n, ToolType: protocol.ToolAction, Parameters: map[string]any{"sha256": strings.Repeat("a", 64)}}
		_, err := ts.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{cmd}})
		requireStatus(t, err, http.StatusForbidden, "actions[0]: "+n+" is a rollout's own")
		_, err = ts.srv.tasks.AdmitCommand(tasks.CommandTask{Asker: tasks.Asker{Who: identity.RolloutCaller("agents"), Kind: api.RequesterRollout},
			Device: "kiosk-1", Actions: []protocol.Command{cmd}})
		assert.NoError(t, err, "%s, asked by a rollout", n)
	}
}
