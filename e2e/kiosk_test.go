package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const kioskPage = `<!doctype html>
<title>Lobby kiosk</title>
<p id="status">Waiting for a visitor</p>
<button onclick="document.getElementById('status').textContent = 'Checked in at the desk'">Check in</button>`

// TestKioskBrowserIsDrivenThroughTheProxiedPlaywrightServer drives a real
// headless Chromium through @playwright/mcp, proxied by the agent: one
// command navigates to a page and takes a snapshot, the next clicks the
// button the snapshot names, and the snapshot after shows the change.
func TestKioskBrowserIsDrivenThroughTheProxiedPlaywrightServer(t *testing.T) {
	playwright := testenv.NodePackage(t, "@playwright/mcp")
	chromium := testenv.Chromium(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, kioskPage)
	}))
	t.Cleanup(page.Close)

	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), func(cfg *agent.Config) {
		cfg.MCP = agent.MCPConfig{"default": {"default": {Action: []agent.MCPServerConfig{{
			Namespace: "browser", Type: agent.MCPStdio, Command: "node",
			StartArgs: []string{filepath.Join(playwright, "cli.js"), "--headless", "--executable-path", chromium, "--isolated", "--no-sandbox"},
			Cwd:       t.TempDir(),
			Timeout:   time.Minute,
		}}}}}
	})
	var tools []protocol.MCPToolInfo
	require.NoError(t, c.api.Do(context.Background(), "GET", "/api/devices/kiosk-1/tools", nil, &tools))
	require.Contains(t, toolKeysOf(tools), "action::browser_click", "the inventory has the browser's tools")

	run := func(actions ...protocol.Command) []protocol.Result {
		t.Helper()
		resp, err := c.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Timeout: "2m", Actions: actions})
		require.NoError(t, err)
		for _, r := range resp.Results {
			require.Equal(t, protocol.ResultSuccess, r.Status, r.Error)
			require.Equal(t, "browser", r.Namespace)
		}
		return resp.Results
	}
	res := run(
		protocol.Command{ToolName: "browser_navigate", Parameters: map[string]any{"url": page.URL}},
		protocol.Command{ToolName: "browser_snapshot"},
	)
	before := res[1].Result.(string)
	assert.Contains(t, before, "Waiting for a visitor")
	ref := regexp.MustCompile(`button "Check in" \[ref=(\w+)\]`).FindStringSubmatch(before)
	require.NotNil(t, ref, "the snapshot names the button:\n%s", before)

	res = run(
		protocol.Command{ToolName: "browser_click", Parameters: map[string]any{"element": "Check in button", "target": ref[1]}},
		protocol.Command{ToolName: "browser_snapshot"},
	)
	after := res[1].Result.(string)
	assert.Contains(t, after, "Checked in at the desk")
	assert.NotContains(t, after, "Waiting for a visitor")
}

func toolKeysOf(tools []protocol.MCPToolInfo) []string {
	var keys []string
	for _, ti := range tools {
		keys = append(keys, ti.ToolKey)
	}
	return keys
}
