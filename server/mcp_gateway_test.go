package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mcpClient is an mcp-go client of /mcp as token, on revision
// 2025-11-25 with its GET stream open, started and initialized; listChanged
// counts the tools/list_changed it hears.
func (ts *testServer) mcpClient(token string) (cl *mcpclient.Client, listChanged func() int) {
	ts.t.Helper()
	cl, err := mcpclient.NewStreamableHttpClient(ts.http.URL+"/mcp", transport.WithContinuousListening(),
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	require.NoError(ts.t, err)
	ts.t.Cleanup(func() { cl.Close() })
	var mu sync.Mutex
	n := 0
	cl.OnNotification(func(m mcp.JSONRPCNotification) {
		if m.Method == string(mcp.MethodNotificationToolsListChanged) {
			mu.Lock()
			n++
			mu.Unlock()
		}
	})
	ctx := context.Background()
	require.NoError(ts.t, cl.Start(ctx))
	_, err = cl.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "test"}}})
	require.NoError(ts.t, err)
	return cl, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// mcpToolNames lists the tools cl is served.
func mcpToolNames(t *testing.T, cl *mcpclient.Client) []string {
	t.Helper()
	res, err := cl.ListTools(context.Background(), mcp.ListToolsRequest{})
	require.NoError(t, err)
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// enrollLabelled enrolls id with labels and returns its token.
func (ts *testServer) enrollLabelled(id string, labels map[string]string) string {
	ts.t.Helper()
	resp, err := ts.api.Enroll(context.Background(), api.EnrollRequest{ID: id, Labels: labels})
	require.NoError(ts.t, err)
	return resp.Token
}

// Enrolling a device can take a scope past the direct-tools threshold:
// the view drops the DEVICE__TOOL tools then, and says so.
func TestEnrollingADeviceRefreshesAnIdentitysMCPTools(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.MCP.DirectTools = 1 })
	lobby := map[string]string{"site": "lobby"}
	ts.mustDial(ts.enrollLabelled("lobby-1", lobby)).register("lobby-1", tool("stock", "echo", protocol.ToolAction))
	cl, listChanged := ts.mcpClient(ts.addIdentity("lobby-op", api.RoleOperator, &api.Scope{Devices: "site=lobby"}))
	require.Contains(t, mcpToolNames(t, cl), "lobby-1__echo", "one device in scope: its tools are direct")

	ts.enrollLabelled("depot-1", map[string]string{"site": "depot"})
	ts.srv.mcp.RefreshAll(context.Background()) // as the enrollment's own refresh will
	assert.Contains(t, mcpToolNames(t, cl), "lobby-1__echo", "a device out of scope does not count")
	ts.enrollLabelled("lobby-2", lobby)
	require.Eventually(t, func() bool { return listChanged() > 0 }, 5*time.Second, 10*time.Millisecond, "tools/list_changed on enrolling")
	assert.NotContains(t, mcpToolNames(t, cl), "lobby-1__echo", "two enrolled devices in scope, past DirectTools")

	require.NoError(t, ts.api.Revoke(context.Background(), "lobby-2"))
	require.Eventually(t, func() bool { return listChanged() > 1 }, 5*time.Second, 10*time.Millisecond, "tools/list_changed on revoking")
	assert.Contains(t, mcpToolNames(t, cl), "lobby-1__echo")
}

// A call through /mcp is marked as such: the task's requester and the
// audit entry's actor are "mcp", under the identity.
func TestAnMCPCallsTaskAndAuditEntrySayItCameThroughMCP(t *testing.T) {
	ts := newTestServer(t)
	ts.device("kiosk-1", tool("stock", "echo", protocol.ToolAction)).serveOK()
	cl, _ := ts.mcpClient(ts.addIdentity("assistant", api.RoleOperator, nil))
	res, err := cl.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "call_device_tool",
		Arguments: map[string]any{"device": "kiosk-1", "tool": "echo"}}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)

	entries, err := ts.api.Audit(context.Background(), api.AuditQuery{Identity: "assistant"})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, api.RequesterMCP, entries[0].Actor)
	task, err := ts.api.Task(context.Background(), entries[0].SessionID)
	require.NoError(t, err)
	assert.Equal(t, api.Requester{Kind: api.RequesterMCP, Identity: "assistant", TokenID: task.Requester.TokenID}, task.Requester)
	assert.NotEmpty(t, task.Requester.TokenID)
}

// A view lives as long as a token that used it: revoking the last one
// drops it, with its MCP server and sessions.
func TestARevokedIdentitysMCPViewIsDropped(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	first := ts.addIdentity("ci", api.RoleOperator, nil)
	second, err := ts.api.RotateIdentity(ctx, "ci", time.Hour)
	require.NoError(t, err)
	ts.mcpClient(first)
	ts.mcpClient(second.Token)
	ts.mcpClient(ts.addIdentity("other", api.RoleViewer, nil))
	require.Equal(t, 1, ts.srv.mcp.Views("ci"), "one view for both tokens of one identity")

	me, err := ts.as(first).WhoAmI(ctx)
	require.NoError(t, err)
	require.NoError(t, ts.api.RevokeToken(ctx, "ci", me.TokenID))
	assert.Equal(t, 1, ts.srv.mcp.Views("ci"), "kept for the token still in use")
	require.NoError(t, ts.api.RevokeIdentity(ctx, "ci"))
	assert.Zero(t, ts.srv.mcp.Views("ci"))
	assert.Equal(t, 1, ts.srv.mcp.Views("other"))
}

// mcpPost posts one JSON-RPC message to /mcp as token, in session (if
// any), on revision 2025-11-25.
func (ts *testServer) mcpPost(ctx context.Context, token, session string, msg map[string]any) (*http.Response, error) {
	b, err := json.Marshal(msg)
	require.NoError(ts.t, err)
	req, err := http.NewRequestWithContext(ctx, "POST", ts.http.URL+"/mcp", bytes.NewReader(b))
	require.NoError(ts.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	return http.DefaultClient.Do(req)
}

// openMCP opens, as token, an MCP session's stream of notifications
// (2025-11-25's GET) and a call to quiet-1 that never answers, and
// returns channels closed when the server ends each.
func (ts *testServer) openMCP(token string) (stream, call <-chan struct{}) {
	ts.t.Helper()
	ctx := context.Background()
	me, err := ts.as(token).WhoAmI(ctx)
	require.NoError(ts.t, err)
	resp, err := ts.mcpPost(ctx, token, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	require.NoError(ts.t, err)
	resp.Body.Close()
	require.Equal(ts.t, http.StatusOK, resp.StatusCode)
	session := resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(ts.t, session)

	req, err := http.NewRequest("GET", ts.http.URL+"/mcp", nil)
	require.NoError(ts.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", session)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(ts.t, err)
	require.Equal(ts.t, http.StatusOK, resp.StatusCode)
	stream = untilEOF(resp)

	answered := make(chan struct{})
	go func() {
		defer close(answered)
		resp, err := ts.mcpPost(ctx, token, session, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
			"params": map[string]any{"name": "call_device_tool", "arguments": map[string]any{"device": "quiet-1", "tool": "echo", "timeout": "1h"}}})
		if err == nil {
			<-untilEOF(resp)
		}
	}()
	require.Eventually(ts.t, func() bool { return ts.mcpTaskRunning(me.TokenID) }, 10*time.Second, 10*time.Millisecond, "the call is running")
	return stream, answered
}

// mcpTaskRunning reports whether a task asked through MCP with token
// tokenID runs.
func (ts *testServer) mcpTaskRunning(tokenID string) bool {
	page, err := ts.api.TaskPage(context.Background(), api.TaskQuery{State: api.StateRunning})
	require.NoError(ts.t, err)
	for _, task := range page.Tasks {
		if task.Requester.TokenID == tokenID && task.Requester.Kind == api.RequesterMCP {
			return true
		}
	}
	return false
}

// A message to /mcp larger than any call can use (the frame cap) is
// refused with 413 before it is read, and the gateway goes on serving.
func TestAnMCPMessageLargerThanTheFrameCapIsRefused(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	huge := strings.Repeat("a", protocol.DefaultMaxFrameBytes+1)
	resp, err := ts.mcpPost(ctx, ts.api.Token, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": map[string]any{"x": huge}})
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Contains(t, string(body), "larger than the")

	resp, err = ts.mcpPost(ctx, ts.api.Token, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// A session whose client went away without its DELETE is dropped once it
// has been idle for SessionIdleTTL; one whose client listens on its
// stream, older but kept by the stream's pings, still hears of changes.
func TestAnIdleMCPSessionIsDroppedAndAListeningOneKept(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.MCP.SessionIdleTTL = 2 * time.Second })
	token := ts.addIdentity("assistant", api.RoleOperator, nil)
	_, listChanged := ts.mcpClient(token)
	resp, err := ts.mcpPost(context.Background(), token, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "gone", "version": "1"}}})
	require.NoError(t, err)
	resp.Body.Close()
	require.NotEmpty(t, resp.Header.Get("Mcp-Session-Id"))
	sessions := func() float64 { return metric(t, ts.scrape(), "edgeaip_mcp_sessions") }
	require.Equal(t, 2.0, sessions())

	require.Eventually(t, func() bool { return sessions() == 1 }, 20*time.Second, 50*time.Millisecond, "the idle session dropped")
	ts.device("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	require.Eventually(t, func() bool { return listChanged() > 0 }, 10*time.Second, 10*time.Millisecond, "the listener hears of the new DEVICE__TOOL")
	assert.Equal(t, 1.0, sessions())
}

// mcpTaskTool calls get_task or cancel_task on task id as cl, and returns
// the answer's text and whether it is an error.
func mcpTaskTool(t *testing.T, cl *mcpclient.Client, tool, id string) (string, bool) {
	t.Helper()
	res, err := cl.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: map[string]any{"id": id}}})
	require.NoError(t, err)
	require.Len(t, res.Content, 1)
	return res.Content[0].(mcp.TextContent).Text, res.IsError
}

// get_task and cancel_task hold a scoped identity to its scope: a task
// on a device outside it, or a fleet whose labels do not imply it, is no
// task, and cancelling one cancels nothing.
func TestAScopedIdentitysGetAndCancelTaskSeeOnlyItsScope(t *testing.T) {
	ts := newTestServer(t)
	lobbyAndDepot(ts)
	ctx := context.Background()
	ts.mustDial(ts.enrollLabelled("quiet-1", map[string]string{"site": "yard"})).register("quiet-1", tool("stock", "echo", protocol.ToolAction))
	lobby, _ := ts.mcpClient(ts.addIdentity("lobby-op", api.RoleOperator, &api.Scope{Devices: "site=lobby"}))

	inScope, err := ts.api.Fleet(ctx, api.FleetRequest{Labels: map[string]string{"site": "lobby"}, Plan: []byte(`"steps: [{tool: echo}]"`)})
	require.NoError(t, err)
	ts.waitTask(inScope.SessionID)
	got, isErr := mcpTaskTool(t, lobby, "get_task", inScope.SessionID)
	require.False(t, isErr, got)
	assert.Contains(t, got, `"state":"completed"`)

	outside, err := ts.api.Fleet(ctx, api.FleetRequest{Labels: map[string]string{"site": "depot"}, Plan: []byte(`"steps: [{tool: echo}]"`)})
	require.NoError(t, err)
	ts.waitTask(outside.SessionID)
	got, isErr = mcpTaskTool(t, lobby, "get_task", outside.SessionID)
	assert.True(t, isErr)
	assert.Equal(t, fmt.Sprintf("no task %q", outside.SessionID), got)

	running := ts.echoInBackground("quiet-1")
	var id string
	require.Eventually(t, func() bool {
		page, err := ts.api.TaskPage(ctx, api.TaskQuery{State: api.StateRunning})
		require.NoError(t, err)
		for _, task := range page.Tasks {
			if task.DeviceID == "quiet-1" {
				id = task.SessionID
			}
		}
		return id != ""
	}, 10*time.Second, 10*time.Millisecond)
	for _, tool := range []string{"get_task", "cancel_task"} {
		got, isErr = mcpTaskTool(t, lobby, tool, id)
		assert.True(t, isErr, tool)
		assert.Equal(t, fmt.Sprintf("no task %q", id), got, tool)
	}
	task, err := ts.api.Task(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, api.StateRunning, task.State, "not cancelled")
	_, err = ts.api.CancelTask(ctx, id)
	require.NoError(t, err)
	<-running
}
