package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/mcpserve"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/internal/version"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serving is cfg with the local MCP endpoint on a free loopback port.
func serving(t *testing.T, cfg Config) Config {
	cfg.MCPServe = config.MCPServe{Listen: closedAddr(t)}
	return cfg
}

// localClient is an mcp-go client of a's local endpoint, initialized, with
// the notifications it gets counted by method.
func localClient(t *testing.T, a *testAgent, opts ...transport.StreamableHTTPCOption) (*client.Client, *notes) {
	t.Helper()
	token, err := os.ReadFile(a.cfg.MCPServe.TokenFile)
	require.NoError(t, err)
	opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + strings.TrimSpace(string(token))}))
	c, err := client.NewStreamableHttpClient("http://"+a.local.Addr().String()+"/mcp", opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	n := &notes{}
	c.OnNotification(n.add)
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	_, err = c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "kiosk-assistant", Version: "1.0"}}})
	require.NoError(t, err)
	return c, n
}

// notes counts the notifications a client got, by method.
type notes struct{ listChanged, progress atomic.Int64 }

func (n *notes) add(m mcp.JSONRPCNotification) {
	switch m.Method {
	case string(mcp.MethodNotificationToolsListChanged):
		n.listChanged.Add(1)
	case string(mcp.MethodNotificationProgress):
		n.progress.Add(1)
	}
}

// localCall waits for the next local_call the agent reports.
func (l *peerLink) localCall(t *testing.T) protocol.ClientMessage {
	t.Helper()
	for {
		m := l.next(t)
		if m.Type == protocol.ClientLocalCall {
			return m
		}
	}
}

func toolNames(tools []mcp.Tool) []string {
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	return names
}

// A local application lists the device's tools, wasm and proxied, but not
// the meta tools, which are the server's; a call runs as a command does,
// and the server hears of it, with who asked.
func TestALocalApplicationCallsTheDevicesToolsAndTheServerHearsOfIt(t *testing.T) {
	p := newTestPeer(t)
	a := startAgent(t, serving(t, agentConfig(t, p.url())))
	l := p.next(t)
	c, _ := localClient(t, a)
	ctx := context.Background()

	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	names := toolNames(tools.Tools)
	assert.Contains(t, names, "echo", "a wasm tool")
	assert.Contains(t, names, "add", "a tool of the proxied MCP server")
	assert.NotContains(t, names, "list_tools")
	assert.NotContains(t, names, "install_tool")
	for _, tool := range tools.Tools {
		if tool.Name == "pause" {
			schema, err := json.Marshal(tool.InputSchema)
			require.NoError(t, err)
			assert.JSONEq(t, `{"type":"object","properties":{"ms":{"type":"integer","minimum":0}},"required":["ms"]}`, string(schema))
			assert.True(t, *tool.Annotations.DestructiveHint, "an action tool")
		}
	}

	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "pause", Arguments: map[string]any{"ms": 1}}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res)
	structured := res.StructuredContent.(map[string]any)
	assert.Equal(t, "success", structured["status"])
	assert.Equal(t, map[string]any{"ms": float64(1)}, structured["result"])
	assert.NotZero(t, structured["usage"].(map[string]any)["fuel"], "usage is in the answer")

	m := l.localCall(t)
	require.Len(t, m.Actions, 1)
	assert.Equal(t, "pause", m.Actions[0].ToolName)
	assert.Equal(t, protocol.ToolAction, m.Actions[0].ToolType)
	assert.EqualValues(t, 1, m.Actions[0].Parameters["ms"])
	require.Len(t, m.ActionResults, 1)
	got := m.ActionResults[0]
	assert.Equal(t, protocol.ResultSuccess, got.Status)
	assert.Nil(t, got.Result, "the result is the application's, not the audit log's")
	require.NotNil(t, got.Usage)
	assert.NotZero(t, got.Usage.Fuel)
	assert.Equal(t, m.Actions[0].CallID, got.CallID)
	assert.Equal(t, got.CallID, m.PrevResponseID)
	assert.Contains(t, m.Metadata["caller"], "kiosk-assistant/1.0")
	assert.True(t, a.logs.Contains("local call done"))

	bad, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "pause", Arguments: map[string]any{"ms": "soon"}}})
	require.NoError(t, err)
	assert.True(t, bad.IsError)
	assert.Contains(t, bad.Content[0].(mcp.TextContent).Text, "ms")
	assert.Equal(t, protocol.ResultFailure, l.localCall(t).ActionResults[0].Status, "a refused call is reported too")
}

func TestTheLocalEndpointWantsItsToken(t *testing.T) {
	p := newTestPeer(t)
	a := startAgent(t, serving(t, agentConfig(t, p.url())))
	p.next(t)
	info, err := os.Stat(a.cfg.MCPServe.TokenFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "made by the agent, for those the operator lets read it")
	assert.Equal(t, filepath.Join(a.cfg.DataDir, config.MCPServeTokenFile), a.cfg.MCPServe.TokenFile)

	for _, auth := range []string{"", "Bearer aipl_wrong"} {
		req, err := http.NewRequest(http.MethodPost, "http://"+a.local.Addr().String()+"/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		assert.Contains(t, string(body), "mcp_serve.token_file")
		assert.Contains(t, resp.Header.Get("WWW-Authenticate"), `error_description="unauthorized: present the token of mcp_serve.token_file`,
			"the challenge says what to do, for clients that show only it")
	}
}

// A local call with a progress token hears that it started and, every
// second, that it still runs, as calls through the server's gateway do.
func TestALocalCallSendsProgressWhileItRuns(t *testing.T) {
	p := newTestPeer(t)
	a := startAgent(t, serving(t, agentConfig(t, p.url())))
	p.next(t)
	c, heard := localClient(t, a)
	res, err := c.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "pause",
		Arguments: map[string]any{"ms": 2500}, Meta: &mcp.Meta{ProgressToken: "p-1"}}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res)
	assert.GreaterOrEqual(t, heard.progress.Load(), int64(2), "its start, and the seconds it ran")
}

// A session the local endpoint does not hold (DELETEd, or never issued)
// is 404, and a request that names none where one is needed 400, as the
// Streamable HTTP transport says.
func TestTheLocalEndpointRefusesSessionsItDoesNotHold(t *testing.T) {
	p := newTestPeer(t)
	a := startAgent(t, serving(t, agentConfig(t, p.url())))
	p.next(t)
	token, err := mcpserve.ReadToken(a.cfg.MCPServe.TokenFile)
	require.NoError(t, err)
	const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

	session := localRequest(t, a, http.MethodPost, token, "", localInitialize).Header.Get("Mcp-Session-Id")
	require.Equal(t, http.StatusOK, localRequest(t, a, http.MethodPost, token, session, list).StatusCode)
	require.Equal(t, http.StatusOK, localRequest(t, a, http.MethodDelete, token, session, "").StatusCode)
	assert.Equal(t, http.StatusNotFound, localRequest(t, a, http.MethodPost, token, session, list).StatusCode, "DELETEd")
	assert.Equal(t, http.StatusNotFound, localRequest(t, a, http.MethodPost, token, "mcp-session-5e0c4a43-8b5c-4f7e-9a43-3f1f0e0c2a10", list).StatusCode,
		"never issued")
	assert.Equal(t, http.StatusBadRequest, localRequest(t, a, http.MethodPost, token, "", list).StatusCode, "none")
}

// A local call made while the link is down is kept in the outbox, across
// a restart too, and reported once the link is up.
func TestALocalCallWhileTheLinkIsDownIsReportedOnceItIsUp(t *testing.T) {
	p := newTestPeer(t)
	cfg := serving(t, agentConfig(t, "ws://"+closedAddr(t)+"/ws"))
	a := startAgent(t, cfg)
	c, _ := localClient(t, a)
	res, err := c.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": 1}}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	a.stop()

	cfg.ServerURL = p.url()
	startAgent(t, cfg)
	m := p.next(t).localCall(t)
	assert.Equal(t, "echo", m.Actions[0].ToolName)
	assert.Equal(t, protocol.ResultSuccess, m.ActionResults[0].Status)
}

// A client that cancels a call stops the wasm tool on the device: the
// looping fixture ends long before any deadline, and the report says it
// was canceled, with the fuel it had burnt.
func TestACancelledLocalCallStopsTheTool(t *testing.T) {
	p := newTestPeer(t)
	a := startAgent(t, serving(t, agentConfig(t, p.url())))
	l := p.next(t)
	c, _ := localClient(t, a)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Second, cancel)
	started := time.Now()
	_, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "spin"}})
	require.Error(t, err)
	m := l.localCall(t)
	assert.Less(t, time.Since(started), 10*time.Second, "stopped, not run to its 30 s deadline")
	got := m.ActionResults[0]
	assert.Equal(t, protocol.ResultFailure, got.Status)
	assert.Contains(t, got.Error, "canceled")
	require.NotNil(t, got.Usage)
	assert.NotZero(t, got.Usage.Fuel, "it ran until it was stopped")
}

// The local endpoint tells its clients when the device's tools change.
func TestTheLocalEndpointSaysWhenTheToolsChange(t *testing.T) {
	p := newTestPeer(t)
	a := startAgent(t, serving(t, agentConfig(t, p.url())))
	p.next(t)
	c, n := localClient(t, a, transport.WithContinuousListening())
	ctx := context.Background()
	_, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "grow"}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return n.listChanged.Load() > 0 }, testenv.Slowdown*10*time.Second, 20*time.Millisecond)
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	assert.Contains(t, toolNames(tools.Tools), "extra_1")
}

// The server may cancel a command it sent: the running wasm call stops,
// and the results say so.
func TestTheServerCancelsARunningCommand(t *testing.T) {
	l := linkedOn(t, protocol.CBOR)
	cmd := newCommand("s-1", action("spin", nil))
	l.send(t, cmd)
	time.Sleep(300 * time.Millisecond)
	started := time.Now()
	l.send(t, &protocol.ServerMessage{Type: protocol.ServerCancelCommand, Status: protocol.StatusOK, ResponseID: cmd.ResponseID, Error: "the MCP client cancelled the call"})
	results := l.results(t, cmd.ResponseID)
	assert.Less(t, time.Since(started), 5*time.Second)
	require.Len(t, results, 1)
	assert.Equal(t, protocol.ResultFailure, results[0].Status)
	assert.Contains(t, results[0].Error, "cancelled by the server: the MCP client cancelled the call")
	require.NotNil(t, results[0].Usage)
	assert.NotZero(t, results[0].Usage.Fuel)
}

// aip-agent mcp-stdio carries a stdio client to the running agent's
// endpoint: the client lists and calls the device's tools, and its
// notifications/cancelled stops a call.
func TestTheStdioBridgeCarriesAClientToTheRunningAgent(t *testing.T) {
	p := newTestPeer(t)
	a := startAgent(t, serving(t, agentConfig(t, p.url())))
	l := p.next(t)
	url, tokenFile, err := LocalEndpoint(a.cfg)
	require.NoError(t, err)

	toBridge, clientOut := io.Pipe()
	clientIn, fromBridge := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	bridged := make(chan error, 1)
	go func() {
		bridged <- BridgeStdio(ctx, url, tokenFile, toBridge, fromBridge, a.logs.Logger())
		fromBridge.Close()
	}()
	c := client.NewClient(transport.NewIO(clientIn, clientOut, io.NopCloser(strings.NewReader(""))))
	require.NoError(t, c.Start(ctx))
	_, err = c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "desktop-app"}}})
	require.NoError(t, err)

	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	require.NoError(t, err)
	assert.Contains(t, toolNames(tools.Tools), "echo")
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 3}}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res)
	m := l.localCall(t)
	assert.Equal(t, "add", m.Actions[0].ToolName)
	assert.Contains(t, m.Metadata["caller"], "aip-agent-mcp-stdio/"+version.Version(), "the bridge says it carried the call")

	callCtx, cancel := context.WithCancel(ctx)
	time.AfterFunc(time.Second, cancel)
	_, err = c.CallTool(callCtx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "spin"}})
	require.Error(t, err)
	spun := l.localCall(t).ActionResults[0]
	assert.Contains(t, spun.Error, "canceled")

	clientOut.Close()
	require.NoError(t, <-bridged, "the bridge ends with its client's input")
	stop()
}

// localRequest sends one request to a's local endpoint as token, in
// session (if any), on revision 2025-11-25; GET opens the session's
// stream, kept open until the test ends.
func localRequest(t *testing.T, a *testAgent, method, token, session, body string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, method, "http://"+a.local.Addr().String()+"/mcp", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	if method != http.MethodGet {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp
}

const localInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// The local endpoint holds at most mcp_serve.max_sessions sessions: past
// it a new one takes the place of the oldest idle one, and is refused
// with 429 and Retry-After once all are busy.
func TestTheLocalEndpointsSessionsAreBounded(t *testing.T) {
	p := newTestPeer(t)
	cfg := serving(t, agentConfig(t, p.url()))
	cfg.MCPServe.MaxSessions = 2
	a := startAgent(t, cfg)
	p.next(t)
	token, err := mcpserve.ReadToken(a.cfg.MCPServe.TokenFile)
	require.NoError(t, err)

	var sessions []string
	for range 3 {
		resp := localRequest(t, a, http.MethodPost, token, "", localInitialize)
		require.Equal(t, http.StatusOK, resp.StatusCode, "an idle session makes room")
		sessions = append(sessions, resp.Header.Get("Mcp-Session-Id"))
	}
	for _, s := range sessions[1:] {
		require.Equal(t, http.StatusOK, localRequest(t, a, http.MethodGet, token, s, "").StatusCode)
	}
	resp := localRequest(t, a, http.MethodPost, token, "", localInitialize)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "both sessions held are busy")
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
}

// Wrong tokens from one address are throttled as on the server: before
// 30 have been tried, the address is refused with 429, the right token
// included.
func TestTheLocalEndpointThrottlesWrongTokens(t *testing.T) {
	p := newTestPeer(t)
	a := startAgent(t, serving(t, agentConfig(t, p.url())))
	p.next(t)
	token, err := mcpserve.ReadToken(a.cfg.MCPServe.TokenFile)
	require.NoError(t, err)

	statuses := map[int]int{}
	for i := range 30 {
		statuses[localRequest(t, a, http.MethodPost, fmt.Sprintf("aipl_guess%d", i), "", localInitialize).StatusCode]++
	}
	assert.Positive(t, statuses[http.StatusTooManyRequests], "%v", statuses)
	resp := localRequest(t, a, http.MethodPost, token, "", localInitialize)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the whole address is refused")
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
}
