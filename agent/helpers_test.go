package agent

import (
	"testing"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/mcpproxy/mcptest"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
)

func TestMain(m *testing.M) { mcptest.Main(m) }

// action is a Command with a call_id named after its tool.
func action(tool string, params map[string]any) protocol.Command {
	return protocol.Command{ToolName: tool, Parameters: params, CallID: "call-" + tool}
}

// defaultAction puts MCP servers under the default agent's default root,
// as action servers.
func defaultAction(servers ...config.MCPServerConfig) config.MCPConfig {
	return config.MCPConfig{"default": {"default": {Action: servers}}}
}

// packed is wasm with manifest m embedded, signed with the test key.
func packed(t *testing.T, wasm []byte, m manifest.Manifest) []byte { return testenv.Packed(t, wasm, m) }
