package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/server"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdkTask is a task as the SDK's client saw it.
type sdkTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	TTL           *int64 `json:"ttl"`
}

// sdkDriven is a tool run as a task through the SDK's callToolStream.
type sdkDriven struct {
	Created  sdkTask  `json:"created"`
	Waiting  sdkTask  `json:"waiting"`
	Got      sdkTask  `json:"got"`
	Statuses []string `json:"statuses"`
	Progress int      `json:"progress"`
	Result   struct {
		IsError           bool           `json:"isError"`
		StructuredContent map[string]any `json:"structuredContent"`
	} `json:"result"`
	Error           string   `json:"error"`
	RelatedProgress int      `json:"relatedProgress"`
	Cancelled       *sdkTask `json:"cancelled"`
}

// The official TypeScript SDK's task API (npm @modelcontextprotocol/sdk,
// 2025-11-25) runs device calls as MCP tasks: one on an online device
// completes, with progress that names the task; one on an offline device
// waits for it and completes once its agent starts again; one cancelled
// half-way ends cancelled, and its wasm call stops on the device. Each is
// one of our tasks, recorded under the identity, and tasks/list lists
// them.
func TestTheTypeScriptSDKRunsDeviceCallsAsMCPTasks(t *testing.T) {
	sdkDir := testenv.NodePackage(t, "@modelcontextprotocol/sdk")
	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"))
	k2 := startsOffline(c, "kiosk-2")

	last := runTaskScript(t, c, "mcp_sdk_tasks.mjs", k2, "SDK_DIR="+sdkDir)

	var got struct {
		Capabilities struct {
			List     any `json:"list"`
			Cancel   any `json:"cancel"`
			Requests struct {
				Tools struct {
					Call any `json:"call"`
				} `json:"tools"`
			} `json:"requests"`
		} `json:"capabilities"`
		TaskSupport map[string]*string `json:"taskSupport"`
		Online      sdkDriven          `json:"online"`
		Offline     sdkDriven          `json:"offline"`
		Cancel      sdkDriven          `json:"cancel"`
		Listed      []string           `json:"listed"`
	}
	require.NoError(t, json.Unmarshal([]byte(last), &got), last)
	assert.NotNil(t, got.Capabilities.List)
	assert.NotNil(t, got.Capabilities.Cancel)
	assert.NotNil(t, got.Capabilities.Requests.Tools.Call)
	assert.Equal(t, "optional", *got.TaskSupport["call_device_tool"])
	assert.Equal(t, "optional", *got.TaskSupport["kiosk-1__pause"])
	assert.Nil(t, got.TaskSupport["list_devices"])

	on := got.Online
	assert.Equal(t, "working", on.Created.Status)
	assert.Equal(t, int64(60000), *on.Created.TTL)
	assert.Empty(t, on.Error)
	assert.False(t, on.Result.IsError)
	assert.Equal(t, "success", on.Result.StructuredContent["status"])
	assert.Equal(t, "completed", on.Got.Status)
	assert.Positive(t, on.Progress, "progress after the task was created")
	assert.Positive(t, on.RelatedProgress, "progress names its task")

	off := got.Offline
	assert.Equal(t, "working", off.Waiting.Status)
	assert.Contains(t, off.Waiting.StatusMessage, `waiting for device "kiosk-2"`)
	assert.Empty(t, off.Error)
	assert.Equal(t, "success", off.Result.StructuredContent["status"])
	assert.Equal(t, "completed", off.Got.Status)

	can := got.Cancel
	require.NotNil(t, can.Cancelled, can.Error)
	assert.Equal(t, "cancelled", can.Cancelled.Status)
	assert.Contains(t, can.Error, "cancelled")
	requireSpinCancelled(t, c)

	for _, d := range []sdkDriven{on, off, can} {
		assert.Contains(t, got.Listed, d.Created.TaskID)
		task, err := c.api.Task(context.Background(), d.Created.TaskID)
		require.NoError(t, err)
		assert.Equal(t, api.RequesterMCP, task.Requester.Kind, "an MCP task is one of our tasks")
	}
	task, err := c.api.Task(context.Background(), can.Created.TaskID)
	require.NoError(t, err)
	assert.Equal(t, api.StateCancelled, task.State)
}

// startsOffline enrolls device id, runs its agent until it has
// registered its tools, and stops it: a device that is known, and
// offline. It returns its token file.
func startsOffline(c *cluster, id string) string {
	token := c.enroll(id)
	c.startAgent(id, token).stop()
	c.waitOnline(id, false)
	return token
}

// runTaskScript runs the node script in e2e/testdata against c's /mcp,
// with kiosk-1 online and kiosk-2 offline (its token file k2), with env
// added; it starts kiosk-2's agent once the script says its task exists
// ({"offline": id}), having checked that the task waits for the device.
// It returns the script's last line.
func runTaskScript(t *testing.T, c *cluster, script, k2 string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(testenv.Root(), "e2e", "testdata", script))
	cmd.Env = append(append(os.Environ(), "MCP_URL="+c.http.URL+"/mcp", "MCP_TOKEN="+c.api.Token, "DEVICE=kiosk-1", "OFFLINE=kiosk-2"), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	var last string
	for lines.Scan() {
		last = lines.Text()
		var ev struct {
			Offline string `json:"offline"`
		}
		if json.Unmarshal([]byte(last), &ev) == nil && ev.Offline != "" {
			task, err := c.api.Task(context.Background(), ev.Offline)
			require.NoError(t, err)
			assert.Equal(t, api.StateRunning, task.State, "the task waits for its device")
			c.startAgent("kiosk-2", k2)
		}
	}
	require.NoError(t, cmd.Wait(), stderr.String())
	return last
}

// The v2 client (npm @modelcontextprotocol/client, on 2026-07-28) with
// the tasks extension's requester (npm @modelcontextprotocol/ext-tasks)
// runs device calls as tasks: one on an online device completes, one on
// an offline device waits for it and completes once its agent starts
// again, one cancelled half-way ends cancelled, and its wasm call stops
// on the device.
func TestTheV2ClientRunsDeviceCallsAsTasksOverTheTasksExtension(t *testing.T) {
	clientDir := testenv.NodePackage(t, "@modelcontextprotocol/client")
	tasksDir := testenv.NodePackage(t, "@modelcontextprotocol/ext-tasks")
	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"))
	k2 := startsOffline(c, "kiosk-2")
	last := runTaskScript(t, c, "mcp_v2_tasks.mjs", k2, "CLIENT_DIR="+clientDir, "TASKS_DIR="+tasksDir)

	type run struct {
		Kind    string `json:"kind"`
		TaskID  string `json:"taskId"`
		Error   string `json:"error"`
		Outcome struct {
			Status string `json:"status"`
			Result struct {
				IsError           bool           `json:"isError"`
				StructuredContent map[string]any `json:"structuredContent"`
			} `json:"result"`
		} `json:"outcome"`
	}
	var got struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Extensions      map[string]any `json:"extensions"`
		Online          run            `json:"online"`
		Offline         run            `json:"offline"`
		Cancel          run            `json:"cancel"`
		Wire            []struct {
			Method string `json:"method"`
		} `json:"wire"`
	}
	require.NoError(t, json.Unmarshal([]byte(last), &got), last)
	assert.Equal(t, "2026-07-28", got.ProtocolVersion)
	assert.Contains(t, got.Extensions, "io.modelcontextprotocol/tasks")
	for _, r := range []run{got.Online, got.Offline} {
		assert.Empty(t, r.Error)
		assert.Equal(t, "task", r.Kind)
		assert.Equal(t, "completed", r.Outcome.Status)
		assert.False(t, r.Outcome.Result.IsError)
		assert.Equal(t, "success", r.Outcome.Result.StructuredContent["status"])
	}
	assert.Equal(t, "cancelled", got.Cancel.Outcome.Status, got.Cancel.Error)
	requireSpinCancelled(t, c)
	cancelled, err := c.api.Task(context.Background(), got.Cancel.TaskID)
	require.NoError(t, err)
	assert.Equal(t, api.StateCancelled, cancelled.State)
	var methods []string
	for _, w := range got.Wire {
		methods = append(methods, w.Method)
	}
	assert.Subset(t, methods, []string{"tools/call", "tasks/get", "tasks/cancel"})
	for _, r := range []run{got.Online, got.Offline, got.Cancel} {
		task, err := c.api.Task(context.Background(), r.TaskID)
		require.NoError(t, err)
		assert.Equal(t, api.RequesterMCP, task.Requester.Kind, "an MCP task is one of our tasks")
	}
}

// rpc sends one JSON-RPC request to c's /mcp on cl's session, as token,
// and returns its result or error: for the task-augmented tools/call,
// which mcp-go's client reads as a CallToolResult.
func (c *cluster) rpc(t *testing.T, cl *client.Client, token, method string, params map[string]any) (json.RawMessage, *mcp.JSONRPCErrorDetails) {
	t.Helper()
	return rpcAt(t, c.http.URL, cl, token, method, params)
}

// rpcAt is rpc to the server at base.
func rpcAt(t *testing.T, base string, cl *client.Client, token, method string, params map[string]any) (json.RawMessage, *mcp.JSONRPCErrorDetails) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", cl.GetSessionId())
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var msg struct {
		Result json.RawMessage          `json:"result"`
		Error  *mcp.JSONRPCErrorDetails `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&msg))
	return msg.Result, msg.Error
}

// An MCP task is its identity's own, survives the server's restart, and
// its ttl is held within the operator's bound: another identity can
// neither read, list, wait for nor cancel it; a viewer, which may not
// call a device's tool, cannot start one as a task; after a restart its
// identity still reads it and its result.
func TestAnMCPTaskIsItsIdentitysOwnAndOutlivesTheServer(t *testing.T) {
	c := newCluster(t, func(cfg *server.Config) { cfg.MCP.TaskMaxTTL = 10 * time.Minute })
	c.startAgent("kiosk-1", c.enroll("kiosk-1"))
	annToken, bobToken := c.identity("ann", api.RoleOperator, nil), c.identity("bob", api.RoleOperator, nil)
	ann, annHeard := c.mcpClientAt(annToken, "2025-11-25", transport.WithContinuousListening())
	bob, _ := c.mcpClientAt(bobToken, "2025-11-25")

	// A pause long enough for ann's stream to be up when it ends.
	raw, rerr := c.rpc(t, ann, annToken, "tools/call", map[string]any{"name": "call_device_tool", "task": map[string]any{"ttl": 3600000},
		"arguments": map[string]any{"device": "kiosk-1", "tool": "pause", "arguments": map[string]any{"ms": 1500}}})
	require.Nil(t, rerr)
	var created mcp.CreateTaskResult
	require.NoError(t, json.Unmarshal(raw, &created))
	id := created.Task.TaskId
	assert.Equal(t, int64(600000), *created.Task.TTL, "held within --mcp-task-max-ttl")

	res, err := ann.TaskResult(context.Background(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: id}})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	require.Eventually(t, func() bool { return annHeard.count(mcp.MethodNotificationTasksStatus) == 1 }, 10*time.Second, 20*time.Millisecond,
		"notifications/tasks/status as the task ended, on the stream of the session that made it")

	_, err = bob.GetTask(context.Background(), mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}})
	assert.ErrorContains(t, err, "task not found", "another identity's task reads as none")
	_, err = bob.TaskResult(context.Background(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: id}})
	assert.Error(t, err)
	// Bob cannot cancel a task of ann's that still runs: it reads as none,
	// and it runs to its end.
	raw, rerr = c.rpc(t, ann, annToken, "tools/call", map[string]any{"name": "call_device_tool", "task": map[string]any{"ttl": 60000},
		"arguments": map[string]any{"device": "kiosk-1", "tool": "pause", "arguments": map[string]any{"ms": 1500}}})
	require.Nil(t, rerr)
	var running mcp.CreateTaskResult
	require.NoError(t, json.Unmarshal(raw, &running))
	_, err = bob.CancelTask(context.Background(), mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: running.Task.TaskId}})
	assert.ErrorContains(t, err, "task not found")
	res, err = ann.TaskResult(context.Background(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: running.Task.TaskId}})
	require.NoError(t, err)
	assert.False(t, res.IsError, "bob's cancel cancelled nothing")
	listed, err := bob.ListTasks(context.Background(), mcp.ListTasksRequest{})
	require.NoError(t, err)
	assert.Empty(t, listed.Tasks)

	viewerToken := c.identity("watcher", api.RoleViewer, nil)
	viewer, _ := c.mcpClientAt(viewerToken, "2025-11-25")
	_, rerr = c.rpc(t, viewer, viewerToken, "tools/call", map[string]any{"name": "call_device_tool", "task": map[string]any{},
		"arguments": map[string]any{"device": "kiosk-1", "tool": "pause", "arguments": map[string]any{"ms": 1}}})
	require.NotNil(t, rerr, "a viewer may not call a device's tool, as a task neither")

	c = c.restart()
	ann, _ = c.mcpClientAt(annToken, "2025-11-25")
	got, err := ann.GetTask(context.Background(), mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}})
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskStatusCompleted, got.Status)
	res, err = ann.TaskResult(context.Background(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: id}})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	listed, err = ann.ListTasks(context.Background(), mcp.ListTasksRequest{})
	require.NoError(t, err)
	require.Len(t, listed.Tasks, 2)
	assert.Equal(t, []string{running.Task.TaskId, id}, []string{listed.Tasks[0].TaskId, listed.Tasks[1].TaskId}, "newest first")
}

// restart stops c's server and starts another on its data directory,
// which it returns, at another address.
func (c *cluster) restart() *cluster {
	c.t.Helper()
	c.srv.Shutdown()
	c.http.Close()
	require.NoError(c.t, c.srv.Close())
	srv, err := server.New(context.Background(), c.cfg)
	require.NoError(c.t, err)
	hs := httptest.NewServer(srv.Handler())
	c.t.Cleanup(func() {
		srv.Shutdown()
		hs.Close()
		srv.Close()
	})
	return &cluster{t: c.t, srv: srv, http: hs, data: c.data, cfg: c.cfg, api: &api.Client{BaseURL: hs.URL, Token: c.api.Token}}
}

// mcpClientTo is an mcp-go client of base's /mcp, as token, on protocol
// revision 2025-11-25, started and initialized.
func mcpClientTo(t *testing.T, base, token string) *client.Client {
	t.Helper()
	cl, err := client.NewStreamableHttpClient(base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	require.NoError(t, cl.Start(context.Background()))
	_, err = cl.Initialize(context.Background(), mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "e2e"}}})
	require.NoError(t, err)
	return cl
}

// In a cluster, an MCP task made through one node is read, and
// cancelled, through another: the node the client asks tells the node
// that runs it, which stops the tool call on its device.
func TestAnMCPTaskMadeThroughOneNodeIsCancelledThroughAnother(t *testing.T) {
	sc := newServerCluster(t, 2)
	n0, n1 := sc.nodes[0], sc.nodes[1]
	token := strings.TrimSpace(string(sc.token))
	sc.agentOn(n0, "kiosk-1", n0.enroll(t, "kiosk-1"), t.TempDir(), t.TempDir())
	sc.waitLinked(n1, "kiosk-1", "node-0")

	via1 := mcpClientTo(t, n1.api.BaseURL, token)
	raw, rerr := rpcAt(t, n1.api.BaseURL, via1, token, "tools/call", map[string]any{"name": "call_device_tool", "task": map[string]any{},
		"arguments": map[string]any{"device": "kiosk-1", "tool": "spin", "timeout": "5m"}})
	require.Nil(t, rerr)
	var created mcp.CreateTaskResult
	require.NoError(t, json.Unmarshal(raw, &created))
	id := created.Task.TaskId

	via0 := mcpClientTo(t, n0.api.BaseURL, token)
	got, err := via0.GetTask(context.Background(), mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}})
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskStatusWorking, got.Status)
	require.Eventually(t, func() bool {
		task, err := n0.api.Task(context.Background(), id)
		return err == nil && len(task.Commands) == 1 && task.Commands[0].Status != ""
	}, 20*time.Second, 20*time.Millisecond, "the spin is out to its device")

	cancelled, err := via0.CancelTask(context.Background(), mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: id}})
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskStatusCancelled, cancelled.Status)
	task, err := n1.api.Task(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, api.StateCancelled, task.State)
	require.Len(t, task.Commands, 1)
	assert.Contains(t, task.Commands[0].Results[0].Error, "cancelled by the server", "the spin stopped on its device")
}

// In a cluster, an MCP task outlives the restart of the node that ran
// it: waiting for its offline device, it is handed off as that node
// drains, runs on on another, completes once the device links again, and
// its client reads its result through the restarted node.
func TestAnMCPTaskOutlivesTheRestartOfItsNode(t *testing.T) {
	sc := newServerCluster(t, 1)
	sc.startNode("node-1", "--drain-grace", "100ms")
	n0, n1 := sc.nodes[0], sc.nodes[1]
	token := strings.TrimSpace(string(sc.token))
	kiosk := n0.enroll(t, "kiosk-1")
	data := t.TempDir()
	first := sc.agentOn(n0, "kiosk-1", kiosk, data, t.TempDir())
	sc.waitLinked(n1, "kiosk-1", "node-0")
	require.NoError(t, first.term())
	require.Eventually(t, func() bool { return !n0.online(t, "kiosk-1") }, 20*time.Second, 20*time.Millisecond)

	via1 := mcpClientTo(t, n1.api.BaseURL, token)
	raw, rerr := rpcAt(t, n1.api.BaseURL, via1, token, "tools/call", map[string]any{"name": "call_device_tool", "task": map[string]any{"ttl": 120000},
		"arguments": map[string]any{"device": "kiosk-1", "tool": "pause", "arguments": map[string]any{"ms": 1}}})
	require.Nil(t, rerr)
	var created mcp.CreateTaskResult
	require.NoError(t, json.Unmarshal(raw, &created))
	id := created.Task.TaskId

	sc.restartNode(1)
	n1 = sc.nodes[1]
	sc.agentOn(n0, "kiosk-1", kiosk, data, t.TempDir())
	again := mcpClientTo(t, n1.api.BaseURL, token)
	res, err := again.TaskResult(context.Background(), mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: id}})
	require.NoError(t, err)
	assert.False(t, res.IsError, "%v", res.Content)
	got, err := again.GetTask(context.Background(), mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}})
	require.NoError(t, err)
	assert.Equal(t, mcp.TaskStatusCompleted, got.Status)
}
