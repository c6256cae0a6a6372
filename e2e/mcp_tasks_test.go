package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/server/api"
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
