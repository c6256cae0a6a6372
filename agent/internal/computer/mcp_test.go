package computer_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/agent/internal/logtest"
	"github.com/edgeaip/edgeaip/agent/internal/mcpproxy"
	"github.com/edgeaip/edgeaip/agent/internal/mcpproxy/mcptest"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMCPServersOverStdioAndHTTPAreProxied(t *testing.T) {
	for name, cfg := range map[string]config.MCPServerConfig{
		"stdio": mcptest.Stdio(t, "helper"),
		"http":  mcptest.HTTP(t, "helper"),
	} {
		t.Run(name, func(t *testing.T) {
			r := newTestRouter(t, defaultAction(cfg))

			res := one(t, r, computer.Target{}, protocol.Command{ToolName: "list_tools", Parameters: map[string]any{"namespace": "helper"}, CallID: "l"})
			keys := toolKeys(t, res)
			assert.Len(t, keys, 10, "every page of tools/list (3 tools a page)")
			assert.Equal(t, "helper", keys["action::add"])

			res = one(t, r, computer.Target{}, action("add", map[string]any{"a": 2, "b": 3}))
			require.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
			assert.Equal(t, map[string]any{"sum": int64(5)}, res.Result, "structured content is the result")
			assert.Equal(t, "helper", res.Namespace)

			res = one(t, r, computer.Target{}, action("say", map[string]any{"text": "hello there"}))
			assert.Equal(t, "hello there", res.Result, "text that is not JSON stays text")
			res = one(t, r, computer.Target{}, action("say", map[string]any{"text": `{"ok": true, "n": [1, 2]}`}))
			assert.Equal(t, map[string]any{"ok": true, "n": []any{int64(1), int64(2)}}, res.Result, "text that is JSON is that JSON")

			res = one(t, r, computer.Target{}, action("picture", nil))
			assert.Equal(t, map[string]any{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}, res.Result,
				"an image is its base64 data with its mime type")

			res = one(t, r, computer.Target{}, action("broken", nil))
			assert.Equal(t, protocol.Result{Status: protocol.ResultFailure, Error: "it broke", Namespace: "helper", CallID: "call-broken"}, res,
				"isError is a failure carrying the text")
		})
	}
}

func TestMCPCallsAreValidatedAgainstTheInputSchema(t *testing.T) {
	r := newTestRouter(t, defaultAction(mcptest.Stdio(t, "helper")))
	res := one(t, r, computer.Target{}, action("add", map[string]any{"a": 2}))
	assert.Equal(t, `tool "add": invalid parameters: parameter "b": missing (required)`, res.Error)
	res = one(t, r, computer.Target{}, action("add", map[string]any{"a": "two", "b": 3}))
	assert.Equal(t, `tool "add": invalid parameters: parameter "a": got string, want number`, res.Error)
}

func TestEveryMCPCallHasADeadline(t *testing.T) {
	cfg := mcptest.Stdio(t, "helper")
	cfg.Timeout = 300 * time.Millisecond
	r := newTestRouter(t, defaultAction(cfg))
	res := one(t, r, computer.Target{}, action("nap", map[string]any{"ms": 60000}))
	assert.Equal(t, protocol.ResultFailure, res.Status)
	assert.Equal(t, `tool "nap" of MCP server "helper": no answer within 300ms`, res.Error)
	res = one(t, r, computer.Target{}, action("say", map[string]any{"text": "still here"}))
	assert.Equal(t, "still here", res.Result, "a late answer does not upset the next call")
}

func TestACrashedStdioServerFailsItsCallsAndIsRestarted(t *testing.T) {
	logs := &logtest.Recorder{}
	r := newTestRouterLog(t, logs.Logger(), defaultAction(mcptest.Stdio(t, "helper")))
	before := one(t, r, computer.Target{}, action("pid", nil))
	require.Equal(t, protocol.ResultSuccess, before.Status, before.Error)
	assert.Eventually(t, func() bool { return logs.Contains("test MCP server up") }, 10*time.Second, 10*time.Millisecond,
		"stderr goes to the agent's log")

	res := one(t, r, computer.Target{}, action("crash", nil))
	assert.Equal(t, protocol.ResultFailure, res.Status)
	assert.Contains(t, res.Error, `tool "crash" of MCP server "helper": the server failed during the call: process exited: exit status 3; restarting it`)
	assert.Eventually(t, func() bool { return logs.Contains("crashing on purpose") }, 10*time.Second, 10*time.Millisecond)

	var after protocol.Result
	require.Eventually(t, func() bool {
		after = one(t, r, computer.Target{}, action("pid", nil))
		return after.Status == protocol.ResultSuccess
	}, 20*time.Second, 50*time.Millisecond, "the server comes back: %s", after.Error)
	assert.NotEqual(t, before.Result, after.Result, "a new process")
}

func TestAServerThatCannotStartIsExplainedAtTheUnknownTool(t *testing.T) {
	r := newTestRouter(t, defaultAction(config.MCPServerConfig{Namespace: "ghost", Type: config.MCPStdio, Command: "/nonexistent/mcp-server", Timeout: time.Second}))
	res := one(t, r, computer.Target{}, action("haunt", nil))
	assert.Contains(t, res.Error, `unknown tool "haunt" (MCP server "ghost" is not running: start /nonexistent/mcp-server:`)
}

func TestToolsListChangedResyncsTheRegistry(t *testing.T) {
	for name, cfg := range map[string]config.MCPServerConfig{
		"stdio": mcptest.Stdio(t, "helper"),
		"http":  mcptest.HTTP(t, "helper"),
	} {
		t.Run(name, func(t *testing.T) {
			changed := make(chan struct{}, 10)
			pool := mcpproxy.NewPool(testCap, "test", quietLog, func() { changed <- struct{}{} })
			t.Cleanup(pool.Close)
			m := computer.NewManager(defaultAction(cfg), nil, pool, quietLog)
			r := computer.NewRouter(m, quietLog)
			c, err := m.Get(context.Background(), computer.Target{})
			require.NoError(t, err)
			<-changed // the first discovery

			// Over HTTP the notification travels on a stream the client
			// opens after initialize; one sent before it is up is lost,
			// so the tool list changes until the agent hears of it.
			var grown any
			for heard := false; !heard; {
				res := one(t, r, computer.Target{}, action("grow", nil))
				require.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
				grown = res.Result
				select {
				case <-changed:
					heard = true
				case <-time.After(time.Second):
					require.NotEqual(t, "extra_10", grown, "no inventory change after tools/list_changed")
				}
			}
			assert.Contains(t, toolNames(c.ListTools("", "helper", true)), grown)
			assert.Equal(t, grown, one(t, r, computer.Target{}, action(grown.(string), nil)).Result)
		})
	}
}

func toolNames(tools []protocol.MCPToolInfo) []string {
	var out []string
	for _, ti := range tools {
		out = append(out, ti.ToolName)
	}
	return out
}

func TestOneComputerPerAgentProcessAndRootFromConfig(t *testing.T) {
	shared := mcptest.Stdio(t, "ui")
	private := mcptest.Stdio(t, "excel")
	private.Reset = true
	r := newTestRouter(t, config.MCPConfig{
		"AppAgent": {
			"default":   {DataCollection: []config.MCPServerConfig{shared}},
			"EXCEL.EXE": {DataCollection: []config.MCPServerConfig{shared}, Action: []config.MCPServerConfig{private}},
		},
	})
	namespaces := func(target computer.Target) map[string]bool {
		res := one(t, r, target, action("list_tools", nil))
		out := map[string]bool{}
		for _, ns := range toolKeys(t, res) {
			out[ns] = true
		}
		return out
	}
	pid := func(target computer.Target, toolType protocol.ToolType) any {
		res := one(t, r, target, protocol.Command{ToolName: "pid", ToolType: toolType, CallID: "pid"})
		require.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
		return res.Result
	}

	book1 := computer.Target{AgentName: "AppAgent", ProcessName: "book1", RootName: "EXCEL.EXE"}
	book2 := computer.Target{AgentName: "AppAgent", ProcessName: "book2", RootName: "EXCEL.EXE"}
	word := computer.Target{AgentName: "AppAgent", ProcessName: "doc", RootName: "WINWORD.EXE"}
	assert.Equal(t, map[string]bool{"ui": true, "excel": true, "fixtures": true}, namespaces(book1))
	assert.Equal(t, map[string]bool{"ui": true, "fixtures": true}, namespaces(word), "an unknown root falls back to default")

	assert.NotEqual(t, pid(book1, protocol.ToolAction), pid(book2, protocol.ToolAction),
		"reset: each Computer has its own instance")
	assert.Equal(t, pid(book1, protocol.ToolAction), pid(book1, protocol.ToolAction), "one Computer per key")
	assert.Equal(t, pid(book1, protocol.ToolDataCollection), pid(word, protocol.ToolDataCollection),
		"a namespace without reset is one server, shared")
}

func TestAnIdleComputerIsEvictedAndTheServerStartedForItStops(t *testing.T) {
	shared := mcptest.Stdio(t, "ui")
	private := mcptest.Stdio(t, "excel")
	private.Reset = true
	pool := mcpproxy.NewPool(testCap, "test", quietLog, func() {})
	t.Cleanup(pool.Close)
	m := computer.NewManager(config.MCPConfig{"AppAgent": {"default": {
		DataCollection: []config.MCPServerConfig{shared}, Action: []config.MCPServerConfig{private},
	}}}, nil, pool, quietLog)
	r := computer.NewRouter(m, quietLog)
	book := computer.Target{AgentName: "AppAgent", ProcessName: "book1"}
	pid := func(toolType protocol.ToolType) int {
		res := one(t, r, book, protocol.Command{ToolName: "pid", ToolType: toolType, CallID: "pid"})
		require.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
		return int(res.Result.(map[string]any)["pid"].(int64))
	}
	privatePid, sharedPid := pid(protocol.ToolAction), pid(protocol.ToolDataCollection)
	byDefault, err := m.Get(context.Background(), computer.Target{})
	require.NoError(t, err)
	later := time.Now().Add(2 * computer.IdleAfter)

	_, release, err := m.Acquire(context.Background(), book)
	require.NoError(t, err)
	m.EvictIdle(later)
	assert.NoError(t, syscall.Kill(privatePid, 0), "a Computer running a command is kept, and its server")
	release()

	m.EvictIdle(later)
	assert.ErrorIs(t, syscall.Kill(privatePid, 0), syscall.ESRCH, "the server started for the evicted Computer is stopped")
	assert.NoError(t, syscall.Kill(sharedPid, 0), "a shared server goes on")
	again, err := m.Get(context.Background(), computer.Target{})
	require.NoError(t, err)
	assert.Same(t, byDefault, again, "the default Computer is never evicted")

	assert.NotEqual(t, privatePid, pid(protocol.ToolAction), "used again, the Computer is built afresh, with a new server")
	assert.Equal(t, sharedPid, pid(protocol.ToolDataCollection))
}
