package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mcpClient is an mcp-go client of the cluster's /mcp, as token, started
// and initialized, with the notifications it gets.
func (c *cluster) mcpClient(token string, opts ...transport.StreamableHTTPCOption) (*client.Client, *heard) {
	c.t.Helper()
	return c.mcpClientAt(token, "", opts...)
}

// mcpClientAt is mcpClient asking for protocol revision version ("": the
// client's latest).
func (c *cluster) mcpClientAt(token, version string, opts ...transport.StreamableHTTPCOption) (*client.Client, *heard) {
	c.t.Helper()
	opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	cl, err := client.NewStreamableHttpClient(c.http.URL+"/mcp", opts...)
	require.NoError(c.t, err)
	c.t.Cleanup(func() { cl.Close() })
	h := &heard{}
	cl.OnNotification(h.add)
	ctx := context.Background()
	require.NoError(c.t, cl.Start(ctx))
	got, err := cl.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: version, ClientInfo: mcp.Implementation{Name: "e2e"}}})
	require.NoError(c.t, err)
	if version != "" {
		require.Equal(c.t, version, got.ProtocolVersion, "the revision the gateway agreed to")
	}
	return cl, h
}

// heard keeps the notifications a client got.
type heard struct {
	mu   sync.Mutex
	msgs []mcp.JSONRPCNotification
}

func (h *heard) add(n mcp.JSONRPCNotification) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, n)
}

func (h *heard) count(method mcp.MCPMethod) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if m.Method == string(method) {
			n++
		}
	}
	return n
}

// identity adds an identity and returns its token.
func (c *cluster) identity(name, role string, scope *api.Scope) string {
	c.t.Helper()
	resp, err := c.api.AddIdentity(context.Background(), api.IdentityRequest{Name: name, Role: role, Scope: scope})
	require.NoError(c.t, err)
	return resp.Token
}

func mcpNames(tools []mcp.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

func callTool(t *testing.T, cl *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cl.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	require.NoError(t, err)
	return res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// An MCP client drives a device's tools through /mcp: it lists them, calls
// one with progress, calls it as DEVICE__TOOL, and each call is a command
// recorded and audited under the identity.
func TestAnMCPClientDrivesADevicesToolsThroughTheGateway(t *testing.T) {
	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"))
	token := c.identity("assistant", api.RoleOperator, nil)
	cl, h := c.mcpClient(token)
	ctx := context.Background()

	tools, err := cl.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	names := mcpNames(tools.Tools)
	for _, n := range []string{"list_devices", "list_device_tools", "call_device_tool", "dispatch_plan", "get_task", "cancel_task", "kiosk-1__pause", "kiosk-1__hash_file"} {
		assert.Contains(t, names, n)
	}
	assert.NotContains(t, names, "kiosk-1__install_tool", "meta tools are not offered directly")
	for _, tool := range tools.Tools {
		switch tool.Name {
		case "kiosk-1__pause":
			b, _ := json.Marshal(tool.InputSchema)
			assert.JSONEq(t, `{"type":"object","properties":{"ms":{"type":"integer","minimum":0}},"required":["ms"]}`, string(b), "the device tool's own schema")
			assert.True(t, *tool.Annotations.DestructiveHint)
		case "kiosk-1__hash_file":
			assert.True(t, *tool.Annotations.ReadOnlyHint, "a data_collection tool")
		}
	}

	devices := callTool(t, cl, "list_devices", nil)
	assert.Contains(t, text(devices), `"id":"kiosk-1","online":true`)

	res, err := cl.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "call_device_tool",
		Arguments: map[string]any{"device": "kiosk-1", "tool": "pause", "arguments": map[string]any{"ms": 2500}},
		Meta:      &mcp.Meta{ProgressToken: "p-1"}}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(res))
	structured := res.StructuredContent.(map[string]any)
	assert.Equal(t, "success", structured["status"])
	assert.NotZero(t, structured["usage"].(map[string]any)["fuel"])
	assert.GreaterOrEqual(t, h.count(mcp.MethodNotificationProgress), 2, "the step's start and the seconds it ran")

	direct := callTool(t, cl, "kiosk-1__pause", map[string]any{"ms": 1})
	require.False(t, direct.IsError, text(direct))
	assert.Equal(t, map[string]any{"ms": float64(1)}, direct.StructuredContent.(map[string]any)["result"])

	entries, err := c.api.Audit(ctx, api.AuditQuery{Identity: "assistant"})
	require.NoError(t, err)
	var tools2 []string
	for _, e := range entries {
		tools2 = append(tools2, e.Tool)
	}
	require.Len(t, tools2, 2, "each call audited under the identity")
	for _, tool := range tools2 {
		assert.Contains(t, tool, "pause")
	}
}

// Bad input is an error result that says what was wrong, never a hang.
func TestBadInputToTheGatewaySaysWhich(t *testing.T) {
	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"))
	c.enroll("kiosk-off")
	cl, _ := c.mcpClient(c.api.Token)
	for name, tc := range map[string]struct {
		args map[string]any
		want string
	}{
		"unknown device": {map[string]any{"device": "nowhere", "tool": "echo"}, `device "nowhere" is not enrolled`},
		"unknown tool":   {map[string]any{"device": "kiosk-1", "tool": "hash_fiel"}, `device "kiosk-1" has no tool "hash_fiel"`},
		"bad arguments":  {map[string]any{"device": "kiosk-1", "tool": "pause", "arguments": map[string]any{"ms": "soon"}}, "ms"},
		"offline":        {map[string]any{"device": "kiosk-off", "tool": "echo"}, "kiosk-off"},
		"bad timeout":    {map[string]any{"device": "kiosk-1", "tool": "echo", "timeout": "forever"}, `argument "timeout"`},
	} {
		t.Run(name, func(t *testing.T) {
			res := callTool(t, cl, "call_device_tool", tc.args)
			assert.True(t, res.IsError)
			assert.Contains(t, text(res), tc.want)
		})
	}
	_, err := cl.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "no_such_tool"}})
	assert.ErrorContains(t, err, "no_such_tool", "an unknown gateway tool is an MCP error")
}

// startAtSites enrolls each device with the label site and starts its
// agent.
func (c *cluster) startAtSites(sites map[string]string) {
	c.t.Helper()
	for id, site := range sites {
		resp, err := c.api.Enroll(context.Background(), api.EnrollRequest{ID: id, Labels: map[string]string{"site": site}})
		require.NoError(c.t, err)
		f := filepath.Join(c.t.TempDir(), id+".token")
		require.NoError(c.t, os.WriteFile(f, []byte(resp.Token), 0o600))
		c.startAgent(id, f)
	}
}

// A scoped identity sees and calls only what its scope covers through
// /mcp; a viewer may look but not call.
func TestAScopedIdentitySeesAndCallsOnlyItsScopeThroughTheGateway(t *testing.T) {
	c := newCluster(t)
	c.startAtSites(map[string]string{"lobby-1": "lobby", "depot-1": "depot"})
	cl, _ := c.mcpClient(c.identity("lobby-op", api.RoleOperator, &api.Scope{Devices: "site=lobby"}))
	tools, err := cl.ListTools(context.Background(), mcp.ListToolsRequest{})
	require.NoError(t, err)
	names := strings.Join(mcpNames(tools.Tools), " ")
	assert.Contains(t, names, "lobby-1__echo")
	assert.NotContains(t, names, "depot-1")
	assert.NotContains(t, text(callTool(t, cl, "list_devices", nil)), "depot-1")

	res := callTool(t, cl, "call_device_tool", map[string]any{"device": "depot-1", "tool": "echo"})
	assert.True(t, res.IsError)
	assert.Equal(t, `device "depot-1" is not enrolled`, text(res), "outside the scope is as not enrolled")
	res = callTool(t, cl, "list_device_tools", map[string]any{"device": "depot-1"})
	assert.True(t, res.IsError)

	viewer, _ := c.mcpClient(c.identity("watcher", api.RoleViewer, nil))
	tools, err = viewer.ListTools(context.Background(), mcp.ListToolsRequest{})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"list_devices", "list_device_tools", "get_task"}, mcpNames(tools.Tools))
	_, err = viewer.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "call_device_tool",
		Arguments: map[string]any{"device": "lobby-1", "tool": "echo"}}})
	assert.Error(t, err, "a viewer has no call_device_tool")
}

// A client that cancels a call stops the wasm call on the device: the
// looping fixture's result says it was cancelled, with the fuel it burnt,
// long before its deadline.
func TestCancellingAnMCPCallStopsTheToolOnTheDevice(t *testing.T) {
	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"))
	cl, _ := c.mcpClient(c.api.Token)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(2*time.Second, cancel)
	_, err := cl.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "call_device_tool",
		Arguments: map[string]any{"device": "kiosk-1", "tool": "spin", "timeout": "5m"}}})
	require.Error(t, err)
	var task api.Task
	require.Eventually(t, func() bool {
		entries, err := c.api.Audit(context.Background(), api.AuditQuery{Device: "kiosk-1"})
		require.NoError(t, err)
		for _, e := range entries {
			if strings.HasSuffix(e.Tool, "spin") && strings.Contains(e.Error, "cancelled by the server") {
				require.NoError(t, c.api.Do(context.Background(), "GET", "/api/tasks/"+e.SessionID, nil, &task))
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "the device reports the spin stopped")
	b, _ := json.Marshal(task)
	assert.Contains(t, string(b), "cancelled by the server: the MCP client cancelled the call")
	assert.Contains(t, string(b), `"fuel":`)
}

// A local application's call through the agent's own endpoint lands in
// the server's audit log, under the application's name.
func TestALocalCallIsInTheServersAuditLog(t *testing.T) {
	c := newCluster(t)
	addr := freeAddr(t)
	tokenFile := filepath.Join(t.TempDir(), "mcp-serve.token")
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), func(cfg *agent.Config) {
		cfg.MCPServe = agent.MCPServe{Listen: addr, TokenFile: tokenFile}
	})
	cl := localClient(t, addr, tokenFile, "2")
	require.False(t, callTool(t, cl, "echo", map[string]any{"say": "hi"}).IsError)

	local := c.localAuditEntry("kiosk-1")
	assert.Equal(t, "action::echo", local.Tool)
	assert.Equal(t, "success", string(local.Outcome))
	assert.Contains(t, local.Identity, "kiosk-assistant/2")
	assert.JSONEq(t, `{"say":"hi"}`, string(local.Parameters))
}

// localClient is an mcp-go client of an agent's own endpoint at addr,
// with the token in tokenFile, initialized as kiosk-assistant/version.
func localClient(t *testing.T, addr, tokenFile, version string) *client.Client {
	t.Helper()
	token, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	cl, err := client.NewStreamableHttpClient("http://"+addr+"/mcp",
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + strings.TrimSpace(string(token))}))
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	ctx := context.Background()
	require.NoError(t, cl.Start(ctx))
	_, err = cl.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "kiosk-assistant", Version: version}}})
	require.NoError(t, err)
	return cl
}

// localAuditEntry waits for the audit log's first entry of a local call
// on device.
func (c *cluster) localAuditEntry(device string) api.AuditEntry {
	c.t.Helper()
	var local api.AuditEntry
	require.Eventually(c.t, func() bool {
		entries, err := c.api.Audit(context.Background(), api.AuditQuery{Device: device})
		require.NoError(c.t, err)
		for _, e := range entries {
			if e.Actor == api.ActorLocal {
				local = e
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "a local call on %s in the audit log", device)
	return local
}

// freeAddr is a loopback address free to listen on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// On each protocol revision the gateway serves, a client hears
// tools/list_changed when a device comes or goes, and gets progress.
func TestTheGatewaySaysWhenDevicesComeAndGoOnEachRevision(t *testing.T) {
	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"))
	legacy, legacyHeard := c.mcpClient(c.api.Token, transport.WithContinuousListening())
	modern, modernHeard := c.mcpClient(c.api.Token)
	// The older revisions mcp-go serves work as 2025-11-25 does, with
	// notifications on the GET stream.
	older := map[string]*client.Client{}
	olderHeard := map[string]*heard{}
	for _, v := range []string{"2025-06-18", "2025-03-26"} {
		older[v], olderHeard[v] = c.mcpClientAt(c.api.Token, v, transport.WithContinuousListening())
	}
	stop, err := modern.ListenAsync(context.Background(), mcp.SubscriptionFilter{ToolsListChanged: true}, nil)
	require.NoError(t, err, "modern: 2026-07-28")
	defer stop()
	_, err = legacy.ListenAsync(context.Background(), mcp.SubscriptionFilter{ToolsListChanged: true}, nil)
	require.Error(t, err, "legacy: 2025-11-25, whose notifications come on its GET stream")
	time.Sleep(200 * time.Millisecond) // the streams are up

	kiosk2 := c.startAgent("kiosk-2", c.enroll("kiosk-2"))
	all := map[string]*heard{"2025-11-25": legacyHeard, "2026-07-28": modernHeard}
	clients := []*client.Client{legacy, modern}
	for v := range older {
		all[v] = olderHeard[v]
		clients = append(clients, older[v])
	}
	for name, h := range all {
		require.Eventually(t, func() bool { return h.count(mcp.MethodNotificationToolsListChanged) > 0 }, 10*time.Second, 20*time.Millisecond, name)
	}
	for _, cl := range clients {
		tools, err := cl.ListTools(context.Background(), mcp.ListToolsRequest{})
		require.NoError(t, err)
		assert.Contains(t, mcpNames(tools.Tools), "kiosk-2__echo")
		res, err := cl.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "kiosk-2__pause",
			Arguments: map[string]any{"ms": 1500}, Meta: &mcp.Meta{ProgressToken: "p"}}})
		require.NoError(t, err)
		require.False(t, res.IsError, text(res))
	}
	for name, h := range all {
		assert.Positive(t, h.count(mcp.MethodNotificationProgress), name)
	}

	before := legacyHeard.count(mcp.MethodNotificationToolsListChanged)
	kiosk2.stop()
	require.Eventually(t, func() bool { return legacyHeard.count(mcp.MethodNotificationToolsListChanged) > before }, 10*time.Second, 20*time.Millisecond)
	tools, err := legacy.ListTools(context.Background(), mcp.ListToolsRequest{})
	require.NoError(t, err)
	for _, tool := range tools.Tools {
		if tool.Name == "kiosk-2__echo" {
			assert.Contains(t, tool.Description, "OFFLINE since", "a device gone has its tools said to be offline, within their grace")
		}
	}
	assert.Contains(t, mcpNames(tools.Tools), "kiosk-2__echo")
}

// dispatch_plan runs a plan as a task, with progress from its steps;
// get_task reads it; cancel_task stops a running one and the tool call
// its device runs.
func TestPlansThroughTheGateway(t *testing.T) {
	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"))
	cl, h := c.mcpClient(c.api.Token)
	ctx := context.Background()
	plan := map[string]any{"steps": []any{
		map[string]any{"tool": "pause", "parameters": map[string]any{"ms": 10}},
		map[string]any{"tool": "fixtures.echo", "parameters": map[string]any{"x": 1}},
	}}
	res, err := cl.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "dispatch_plan",
		Arguments: map[string]any{"device": "kiosk-1", "plan": plan}, Meta: &mcp.Meta{ProgressToken: "plan"}}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(res))
	task := res.StructuredContent.(map[string]any)
	assert.Equal(t, "completed", task["state"])
	assert.GreaterOrEqual(t, h.count(mcp.MethodNotificationProgress), 4, "each step's start and end")

	got := callTool(t, cl, "get_task", map[string]any{"id": task["session_id"]})
	require.False(t, got.IsError, text(got))
	assert.Equal(t, "completed", got.StructuredContent.(map[string]any)["state"])

	yaml := "steps:\n  - tool: spin\n    timeout: 5m\n"
	started := callTool(t, cl, "dispatch_plan", map[string]any{"labels": map[string]any{}, "plan": yaml})
	assert.True(t, started.IsError)
	assert.Equal(t, `argument "labels": at least one label is required`, text(started), "not the whole fleet")
	started = callTool(t, cl, "dispatch_plan", map[string]any{"labels": map[string]any{"site": "moon"}, "plan": yaml})
	assert.Equal(t, "no enrolled device has the labels site=moon", text(started))
	started = callTool(t, cl, "dispatch_plan", map[string]any{"device": "kiosk-1", "plan": yaml, "wait": false})
	require.False(t, started.IsError, text(started))
	id := started.StructuredContent.(map[string]any)["session_id"].(string)
	time.Sleep(time.Second)
	cancelled := callTool(t, cl, "cancel_task", map[string]any{"id": id})
	require.False(t, cancelled.IsError, text(cancelled))
	requireSpinCancelled(t, c)

	missing := callTool(t, cl, "get_task", map[string]any{"id": "nope"})
	assert.True(t, missing.IsError)
	assert.Equal(t, `no task "nope"`, text(missing))
}

// dispatch_plan to labels runs the plan on every device that has them,
// as a fleet, with progress from each device's steps, and answers with
// the fleet's outcome, device by device.
func TestAFleetRunsThroughTheGateway(t *testing.T) {
	c := newCluster(t)
	c.startAtSites(map[string]string{"lobby-1": "lobby", "lobby-2": "lobby", "depot-1": "depot"})
	cl, h := c.mcpClient(c.api.Token)
	plan := map[string]any{"steps": []any{
		map[string]any{"tool": "pause", "parameters": map[string]any{"ms": 1200}},
		map[string]any{"tool": "fixtures.echo", "parameters": map[string]any{"x": 1}},
	}}
	res, err := cl.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "dispatch_plan",
		Arguments: map[string]any{"labels": map[string]any{"site": "lobby"}, "plan": plan}, Meta: &mcp.Meta{ProgressToken: "fleet"}}})
	require.NoError(t, err)
	require.False(t, res.IsError, text(res))

	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var fleet api.Task
	require.NoError(t, json.Unmarshal(b, &fleet))
	assert.Equal(t, api.KindFleet, fleet.Kind)
	assert.Equal(t, api.StateCompleted, fleet.State)
	assert.Equal(t, api.RequesterMCP, fleet.Requester.Kind)
	b, err = json.Marshal(fleet.Result)
	require.NoError(t, err)
	var outcome api.FleetResult
	require.NoError(t, json.Unmarshal(b, &outcome))
	assert.Equal(t, map[string]string{"site": "lobby"}, outcome.Labels)
	var devices []string
	for _, d := range outcome.Devices {
		devices = append(devices, d.DeviceID)
		assert.Equal(t, api.StateCompleted, d.State, d.DeviceID)
		device, err := c.api.Task(context.Background(), d.SessionID)
		require.NoError(t, err)
		assert.Len(t, device.Commands, 2, "each step ran on %s", d.DeviceID)
	}
	assert.ElementsMatch(t, []string{"lobby-1", "lobby-2"}, devices, "not depot-1")
	assert.GreaterOrEqual(t, h.count(mcp.MethodNotificationProgress), 2, "progress while the fleet ran")
}

// A local call the agent dies during is not lost to the audit log: it was
// recorded in the outbox before it ran, and after the restart it is
// reported as interrupted.
func TestALocalCallTheAgentDiesDuringIsInTheAuditLogAfterTheRestart(t *testing.T) {
	c := newCluster(t)
	data := t.TempDir()
	addr, tokenFile := freeAddr(t), filepath.Join(t.TempDir(), "mcp-serve.token")
	yaml := agentYAML(t, "kiosk-1", c.wsURL(), c.enroll("kiosk-1"), data, t.TempDir()) +
		fmt.Sprintf("mcp_serve: {listen: %q, token_file: %q}\n", addr, tokenFile)
	p := newAgentProcess(t, yaml)
	p.start()
	c.waitOnline("kiosk-1", true)
	cl := localClient(t, addr, tokenFile, "3")
	go cl.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "spin"}}) //nolint:errcheck // the agent dies under it

	journal := filepath.Join(data, "outbox", "kiosk-1.journal")
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(journal)
		return bytes.Contains(b, []byte("local-"))
	}, 20*time.Second, 10*time.Millisecond, "the call is in the outbox before it runs")
	p.kill()
	p.start()

	local := c.localAuditEntry("kiosk-1")
	assert.Equal(t, "action::spin", local.Tool)
	assert.Equal(t, "failure", string(local.Outcome))
	assert.Equal(t, "agent restarted while the call ran", local.Error)
	assert.Contains(t, local.Identity, "kiosk-assistant/3")
}
