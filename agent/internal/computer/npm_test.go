package computer_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The proxy against real MCP servers from npm, at the versions `make
// deps-npm` pins.

func TestProxyRealMCPServersFromNPM(t *testing.T) {
	everything := testenv.NodePackage(t, "@modelcontextprotocol/server-everything")
	filesystem := testenv.NodePackage(t, "@modelcontextprotocol/server-filesystem")
	allowed := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(allowed, "motd.txt"), []byte("welcome to the lobby\n"), 0o644))

	// Both under data_collection, which a command without a tool_type
	// tries first: the wasm fixtures have an action::echo too.
	r := newTestRouter(t, config.MCPConfig{"default": {"default": {DataCollection: []config.MCPServerConfig{
		{Namespace: "everything", Type: config.MCPStdio, Command: "node",
			StartArgs: []string{filepath.Join(everything, "dist", "index.js"), "stdio"}},
		{Namespace: "files", Type: config.MCPStdio, Command: "node",
			StartArgs: []string{filepath.Join(filesystem, "dist", "index.js"), allowed}},
	}}}})

	t.Run("tools are listed under each server's namespace", func(t *testing.T) {
		keys := toolKeys(t, one(t, r, computer.Target{}, action("list_tools", nil)))
		assert.Equal(t, "everything", keys["data_collection::echo"])
		assert.Equal(t, "everything", keys["data_collection::get-sum"])
		assert.Equal(t, "fixtures", keys["action::echo"], "the same name under the other tool type")
		assert.Equal(t, "files", keys["data_collection::read_file"])
		assert.Equal(t, "files", keys["data_collection::list_directory"])
	})
	t.Run("echo", func(t *testing.T) {
		res := one(t, r, computer.Target{}, action("echo", map[string]any{"message": "hello kiosk"}))
		assert.Equal(t, protocol.Result{Status: protocol.ResultSuccess, Result: "Echo: hello kiosk", Namespace: "everything", CallID: "call-echo"}, res)
	})
	t.Run("get-sum", func(t *testing.T) {
		res := one(t, r, computer.Target{}, action("get-sum", map[string]any{"a": 2, "b": 3}))
		assert.Equal(t, "The sum of 2 and 3 is 5.", res.Result, res.Error)
		res = one(t, r, computer.Target{}, action("get-sum", map[string]any{"a": 2}))
		assert.Equal(t, `tool "get-sum": invalid parameters: parameter "b": missing (required)`, res.Error, "checked against the server's inputSchema")
	})
	t.Run("read_file", func(t *testing.T) {
		res := one(t, r, computer.Target{}, action("read_file", map[string]any{"path": filepath.Join(allowed, "motd.txt")}))
		assert.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
		assert.Equal(t, map[string]any{"content": "welcome to the lobby\n"}, res.Result, "its structured content")
	})
	t.Run("access denied is a failure", func(t *testing.T) {
		res := one(t, r, computer.Target{}, action("read_file", map[string]any{"path": "/etc/hostname"}))
		assert.Equal(t, protocol.ResultFailure, res.Status)
		assert.Contains(t, res.Error, "Access denied - path outside allowed directories")
		assert.Equal(t, "files", res.Namespace)
	})
}
