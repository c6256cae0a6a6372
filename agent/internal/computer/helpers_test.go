package computer_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/agent/internal/logtest"
	"github.com/edgeaip/edgeaip/agent/internal/mcpproxy"
	"github.com/edgeaip/edgeaip/agent/internal/mcpproxy/mcptest"
	"github.com/edgeaip/edgeaip/agent/internal/reply"
	"github.com/edgeaip/edgeaip/agent/internal/toolbox"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { mcptest.Main(m) }

var quietLog = logtest.Quiet

// testCap is the default link's frame cap.
var testCap = reply.Cap{Enc: protocol.CBOR, Max: protocol.DefaultMaxFrameBytes}

// newTestRouter builds a Router over real tools: the wasm fixtures of
// testdata/tools (namespace "fixtures"), the tool dirs given, and the MCP
// servers of mcpCfg. Wasm calls time out after a second. Everything stops
// when the test ends.
func newTestRouter(t *testing.T, mcpCfg config.MCPConfig, dirs ...string) *computer.Router {
	t.Helper()
	return newTestRouterLog(t, quietLog, mcpCfg, dirs...)
}

func newTestRouterLog(t *testing.T, log *slog.Logger, mcpCfg config.MCPConfig, dirs ...string) *computer.Router {
	t.Helper()
	return computer.NewRouter(newTestManager(t, log, testCap, func() {}, mcpCfg, dirs...), log)
}

// newTestManager is the Manager of newTestRouter, whose MCP results are
// held to cap and which tells changed of a changed tool list.
func newTestManager(t *testing.T, log *slog.Logger, cap reply.Cap, changed func(), mcpCfg config.MCPConfig, dirs ...string) *computer.Manager {
	t.Helper()
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.NewConfig().WithLimits(sandbox.Limits{Timeout: time.Second}).WithCacheDir(filepath.Join(os.TempDir(), "edgeaip-agent-test-cache")))
	require.NoError(t, err)
	t.Cleanup(func() { sb.Close(ctx) })
	cfg := config.Config{DataDir: t.TempDir(), ToolDirs: append([]string{"fixtures=" + testenv.TestdataTools()}, dirs...), MCP: mcpCfg}
	cfg.SetDefaults()
	box := toolbox.New(sb, cfg, log, func() {})
	tools, err := box.Load(ctx)
	require.NoError(t, err)
	require.Empty(t, box.Refusals())
	pool := mcpproxy.NewPool(cap, "test", log, changed)
	t.Cleanup(pool.Close)
	return computer.NewManager(cfg.MCP, tools, pool, log)
}

// probeDirs makes two tool dirs, "probes" and "acts", each with a tool
// named probe, built from the echo fixture: a data_collection probe that
// requires a string msg, and an action probe that takes anything.
func probeDirs(t *testing.T) []string {
	t.Helper()
	echo, err := os.ReadFile(filepath.Join(testenv.TestdataTools(), "echo.wasm"))
	require.NoError(t, err)
	root := t.TempDir()
	var specs []string
	for ns, desc := range map[string]map[string]any{
		"probes": {"name": "probe", "tool_type": protocol.ToolDataCollection, "input_schema": map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"msg": map[string]any{"type": "string"}, "n": map[string]any{"type": "integer"}},
			"required":             []any{"msg"},
			"additionalProperties": false,
		}},
		"acts": {"name": "probe", "tool_type": protocol.ToolAction, "input_schema": map[string]any{"type": "object"}},
	} {
		dir := filepath.Join(root, ns)
		require.NoError(t, os.Mkdir(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "probe.wasm"), echo, 0o644))
		b, err := json.Marshal(desc)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "probe.json"), b, 0o644))
		specs = append(specs, dir)
	}
	return specs
}

// action is a Command with a call_id named after its tool.
func action(tool string, params map[string]any) protocol.Command {
	return protocol.Command{ToolName: tool, Parameters: params, CallID: "call-" + tool}
}

// defaultAction puts MCP servers under the default agent's default root,
// as action servers.
func defaultAction(servers ...config.MCPServerConfig) config.MCPConfig {
	return config.MCPConfig{"default": {"default": {Action: servers}}}
}

func one(t *testing.T, r *computer.Router, target computer.Target, c protocol.Command) protocol.Result {
	t.Helper()
	return execute(t, r, target, true, c)[0]
}
