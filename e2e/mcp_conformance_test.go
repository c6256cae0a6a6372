package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdkTools is what mcp_sdk_tools.mjs saw.
type sdkTools struct {
	Pages int `json:"pages"`
	Tools map[string]struct {
		Title        string         `json:"title"`
		Description  string         `json:"description"`
		OutputSchema map[string]any `json:"outputSchema"`
		Annotations  map[string]any `json:"annotations"`
	} `json:"tools"`
	Calls map[string]struct {
		Thrown     string         `json:"thrown"`
		IsError    bool           `json:"isError"`
		Structured map[string]any `json:"structured"`
		Text       string         `json:"text"`
	} `json:"calls"`
}

// The TypeScript SDK's client lists the gateway's tools page by page, each
// page holding the spec's schema (the SDK parses it), every tool with a
// title and an outputSchema that its answers match (the SDK checks each
// call's structuredContent against it), the lookups read-only and not
// destructive; an offline device's tools stay listed, said to be offline
// since when, and a call to one says the device is offline.
func TestTheTypeScriptSDKPagesThroughToolsWithOutputSchemasAndAnOfflineDevicesTools(t *testing.T) {
	sdkDir := testenv.NodePackage(t, "@modelcontextprotocol/sdk")
	c := newCluster(t, func(cfg *server.Config) { cfg.MCP.ToolsPageSize = 5 })
	c.startAgent("kiosk-1", c.enroll("kiosk-1"))
	c.startAgent("kiosk-2", c.enroll("kiosk-2")).stop()
	c.waitOnline("kiosk-2", false)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(testenv.Root(), "e2e", "testdata", "mcp_sdk_tools.mjs"))
	cmd.Env = append(os.Environ(), "SDK_DIR="+sdkDir, "MCP_URL="+c.http.URL+"/mcp", "MCP_TOKEN="+c.api.Token,
		"DEVICE=kiosk-1", "OFFLINE=kiosk-2")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var got sdkTools
	require.NoError(t, json.Unmarshal(stdout, &got), string(stdout))

	assert.Greater(t, got.Pages, 2, "pages of 5 tools")
	for _, n := range []string{"list_devices", "list_device_tools", "call_device_tool", "dispatch_plan", "get_task", "cancel_task",
		"kiosk-1__pause", "kiosk-1__hash_file", "kiosk-2__pause", "kiosk-2__hash_file"} {
		assert.Contains(t, got.Tools, n)
	}
	for name, tool := range got.Tools {
		assert.NotEmpty(t, tool.Title, name)
		assert.Equal(t, "object", tool.OutputSchema["type"], name)
	}
	for _, name := range []string{"list_devices", "list_device_tools", "get_task"} {
		assert.Equal(t, map[string]any{"title": got.Tools[name].Title, "readOnlyHint": true, "destructiveHint": false,
			"idempotentHint": true, "openWorldHint": false}, got.Tools[name].Annotations, name)
	}
	props, _ := got.Tools["kiosk-1__pause"].OutputSchema["properties"].(map[string]any)
	assert.Contains(t, mustJSON(t, props["result"]), `"required":["ms"]`, "the tool's own output schema is the result's")

	assert.Contains(t, got.Tools["kiosk-2__pause"].Description, "kiosk-2, which is OFFLINE since ")
	assert.NotContains(t, got.Tools["kiosk-1__pause"].Description, "OFFLINE")
	for label, call := range got.Calls {
		assert.Empty(t, call.Thrown, label)
		if label != "offline_direct" {
			assert.False(t, call.IsError, "%s: %s", label, call.Text)
		}
	}
	assert.Equal(t, "completed", got.Calls["get_task"].Structured["state"])
	offline := got.Calls["offline_direct"]
	assert.True(t, offline.IsError)
	assert.Contains(t, offline.Text, `device "kiosk-2" shut down`, "its agent stopped")
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// An offline device's tools go from the list once the grace the operator
// set has passed since it was last heard from.
func TestAnOfflineDevicesToolsGoAfterTheirGrace(t *testing.T) {
	const grace = 5 * time.Second
	c := newCluster(t, func(cfg *server.Config) { cfg.MCP.OfflineToolsGrace = grace })
	c.startAgent("kiosk-1", c.enroll("kiosk-1")).stop()
	c.waitOnline("kiosk-1", false)
	cl, h := c.mcpClient(c.api.Token, transport.WithContinuousListening())
	tools, err := cl.ListTools(context.Background(), mcp.ListToolsRequest{})
	require.NoError(t, err)
	require.Contains(t, mcpNames(tools.Tools), "kiosk-1__pause", "listed within its grace")
	require.Eventually(t, func() bool { return h.count(mcp.MethodNotificationToolsListChanged) > 0 }, 20*time.Second, 20*time.Millisecond,
		"the list changes as the grace ends")
	tools, err = cl.ListTools(context.Background(), mcp.ListToolsRequest{})
	require.NoError(t, err)
	assert.NotContains(t, mcpNames(tools.Tools), "kiosk-1__pause")
}

// call_device_tool with wait_for_device waits for an offline device, as
// the API's command does, and runs the call once the device links again.
func TestCallDeviceToolWaitsForAnOfflineDeviceWhenAsked(t *testing.T) {
	c := newCluster(t)
	token := c.enroll("kiosk-1")
	c.startAgent("kiosk-1", token).stop()
	c.waitOnline("kiosk-1", false)
	cl, _ := c.mcpClient(c.api.Token)

	res := callTool(t, cl, "call_device_tool", map[string]any{"device": "kiosk-1", "tool": "pause", "arguments": map[string]any{"ms": 1}})
	assert.True(t, res.IsError, "without wait_for_device an offline device fails at once")
	assert.Contains(t, text(res), `device "kiosk-1" shut down`)

	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cl.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "call_device_tool",
			Arguments: map[string]any{"device": "kiosk-1", "tool": "pause", "arguments": map[string]any{"ms": 1}, "wait_for_device": true, "timeout": "2m"}}})
		assert.NoError(t, err)
		done <- res
	}()
	require.Eventually(t, func() bool {
		running, err := c.api.Tasks(context.Background(), api.StateRunning, 10)
		require.NoError(t, err)
		return len(running) == 1
	}, 20*time.Second, 20*time.Millisecond, "the call waits, as a running task")
	c.startAgent("kiosk-1", token)
	res = <-done
	require.NotNil(t, res)
	assert.False(t, res.IsError, text(res))
	assert.Equal(t, "success", res.StructuredContent.(map[string]any)["status"])
}

// The TypeScript SDK's client, on a session it DELETEd or one the
// server never issued, gets 404, on which a client initializes again; a
// 401 from /mcp carries a Bearer challenge with the server's message
// (RFC 6750), and a request on no session where one is needed is 400.
func TestAnEndedOrUnknownMCPSessionIs404AndA401IsABearerChallenge(t *testing.T) {
	sdkDir := testenv.NodePackage(t, "@modelcontextprotocol/sdk")
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(testenv.Root(), "e2e", "testdata", "mcp_sdk_sessions.mjs"))
	cmd.Env = append(os.Environ(), "SDK_DIR="+sdkDir, "MCP_URL="+c.http.URL+"/mcp", "MCP_TOKEN="+c.api.Token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var got map[string]any
	require.NoError(t, json.Unmarshal(stdout, &got), string(stdout))
	assert.Equal(t, map[string]any{"before": 200.0, "deleted": 404.0, "neverIssued": 404.0}, got)

	post := func(token, session string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, c.http.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
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
		resp.Body.Close()
		return resp
	}
	assert.Equal(t, http.StatusBadRequest, post(c.api.Token, "").StatusCode, "no session")
	resp := post("not-a-token", "")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Equal(t, `Bearer realm="aip-server", error="invalid_token", error_description="wrong operator token"`, resp.Header.Get("WWW-Authenticate"))
}

// runningTask waits for the one task running on the cluster, and
// returns its id.
func (c *cluster) runningTask() string {
	c.t.Helper()
	var id string
	require.Eventually(c.t, func() bool {
		running, err := c.api.Tasks(context.Background(), api.StateRunning, 10)
		require.NoError(c.t, err)
		if len(running) == 1 {
			id = running[0].SessionID
		}
		return id != ""
	}, 20*time.Second, 20*time.Millisecond, "a task runs")
	return id
}

// endedTask waits for task id to end, and returns it as the API has it.
func (c *cluster) endedTask(id string) api.Task {
	c.t.Helper()
	var task api.Task
	require.Eventually(c.t, func() bool {
		require.NoError(c.t, c.api.Do(context.Background(), "GET", "/api/tasks/"+id, nil, &task))
		return task.State != api.StateRunning && task.State != api.StateCreated
	}, 30*time.Second, 20*time.Millisecond, "task %s ends", id)
	return task
}

// A single command cancelled ends cancelled, as a cancelled plan does,
// however it was cancelled: by the MCP client that called it
// (notifications/cancelled), by cancel_task, or by the API (aipctl
// cancel); the device's results still say the tool was stopped.
func TestACancelledCommandEndsCancelledOnEverySurface(t *testing.T) {
	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"))
	cl, _ := c.mcpClient(c.api.Token)
	spin := func(ctx context.Context) {
		_, err := cl.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "call_device_tool",
			Arguments: map[string]any{"device": "kiosk-1", "tool": "spin", "timeout": "5m"}}})
		_ = err // the call is cancelled, one way or another
	}

	ctx, cancel := context.WithCancel(context.Background())
	go spin(ctx)
	id := c.runningTask()
	cancel()
	task := c.endedTask(id)
	assert.Equal(t, api.StateCancelled, task.State, "cancelled by the MCP client: %s", task.Error)

	go spin(context.Background())
	id = c.runningTask()
	res := callTool(t, cl, "cancel_task", map[string]any{"id": id})
	require.False(t, res.IsError, text(res))
	assert.Equal(t, "cancelled", res.StructuredContent.(map[string]any)["state"], "cancel_task's answer")
	assert.Equal(t, api.StateCancelled, c.endedTask(id).State)

	go c.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "spin"}}, Timeout: "5m"})
	id = c.runningTask()
	task, err := c.api.CancelTask(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, api.StateCancelled, task.State, "the API's answer, which aipctl cancel shows")
	task = c.endedTask(id)
	assert.Equal(t, api.StateCancelled, task.State)
	assert.Contains(t, mustJSON(t, task), "cancelled by the server", "the device's results say the tool was stopped")
}
