package e2e

import (
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

// The official TypeScript SDK's client (npm @modelcontextprotocol/sdk,
// pinned in the Makefile) lists the gateway's tools, calls a device's
// tool with progress and as DEVICE__TOOL, and cancels a call: the wasm
// call on the device stops.
func TestTheTypeScriptSDKClientDrivesTheGateway(t *testing.T) {
	sdkDir := testenv.NodePackage(t, "@modelcontextprotocol/sdk")
	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(testenv.Root(), "e2e", "testdata", "mcp_sdk_client.mjs"))
	cmd.Env = append(os.Environ(), "SDK_DIR="+sdkDir, "MCP_URL="+c.http.URL+"/mcp", "MCP_TOKEN="+c.api.Token, "DEVICE=kiosk-1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var got struct {
		ProtocolVersion string   `json:"protocolVersion"`
		Tools           []string `json:"tools"`
		Call            struct {
			IsError  bool    `json:"isError"`
			Status   string  `json:"status"`
			Fuel     float64 `json:"fuel"`
			Progress int     `json:"progress"`
		} `json:"call"`
		Direct struct {
			IsError bool           `json:"isError"`
			Result  map[string]any `json:"result"`
		} `json:"direct"`
		Cancelled bool `json:"cancelled"`
	}
	require.NoError(t, json.Unmarshal(stdout, &got), string(stdout))
	assert.Equal(t, "2025-11-25", got.ProtocolVersion)
	assert.Contains(t, got.Tools, "call_device_tool")
	assert.Contains(t, got.Tools, "kiosk-1__pause")
	assert.False(t, got.Call.IsError)
	assert.Equal(t, "success", got.Call.Status)
	assert.Positive(t, got.Call.Fuel)
	assert.GreaterOrEqual(t, got.Call.Progress, 2, "progress while the call ran")
	assert.False(t, got.Direct.IsError)
	assert.Equal(t, map[string]any{"ms": float64(1)}, got.Direct.Result)
	assert.True(t, got.Cancelled)
	requireSpinCancelled(t, c)
}

// requireSpinCancelled waits for the audit log to show the looping
// fixture stopped on the device by the server's cancellation.
func requireSpinCancelled(t *testing.T, c *cluster) {
	t.Helper()
	require.Eventually(t, func() bool {
		entries, err := c.api.Audit(context.Background(), api.AuditQuery{Device: "kiosk-1"})
		require.NoError(t, err)
		for _, e := range entries {
			if strings.HasSuffix(e.Tool, "spin") && strings.Contains(e.Error, "canceled: cancelled by the server") {
				return true
			}
		}
		return false
	}, 20*time.Second, 50*time.Millisecond, "the device reports the spin stopped by the cancellation")
}

// The MCP Inspector's CLI (pinned in the Makefile) lists the gateway's
// tools.
func TestTheMCPInspectorListsTheGatewaysTools(t *testing.T) {
	dir := testenv.NodePackage(t, "@modelcontextprotocol/inspector")
	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "clients", "launcher", "build", "index.js"), "--cli", c.http.URL+"/mcp",
		"--transport", "http", "--header", "Authorization: Bearer "+c.api.Token, "--method", "tools/list")
	cmd.Env = append(os.Environ(), "MCP_CATALOG_PATH="+filepath.Join(t.TempDir(), "mcp.json"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	var got struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(stdout, &got), string(stdout))
	var names []string
	for _, tool := range got.Tools {
		names = append(names, tool.Name)
	}
	for _, n := range []string{"list_devices", "list_device_tools", "call_device_tool", "dispatch_plan", "get_task", "cancel_task", "kiosk-1__echo"} {
		assert.Contains(t, names, n)
	}
}
