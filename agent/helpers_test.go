package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newTestRouter builds a Router over real tools: the wasm fixtures of
// testdata/tools (namespace "fixtures"), the tool dirs given, and the MCP
// servers of mcpCfg. Wasm calls time out after a second. Everything stops
// when the test ends.
func newTestRouter(t *testing.T, mcpCfg MCPConfig, dirs ...string) *Router {
	t.Helper()
	return newTestRouterLog(t, quietLog, mcpCfg, dirs...)
}

func newTestRouterLog(t *testing.T, log *slog.Logger, mcpCfg MCPConfig, dirs ...string) *Router {
	t.Helper()
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.NewConfig().WithLimits(sandbox.Limits{Timeout: time.Second}).WithCacheDir(filepath.Join(os.TempDir(), "edgeaip-agent-test-cache")))
	require.NoError(t, err)
	t.Cleanup(func() { sb.Close(ctx) })
	cfg := Config{MCP: mcpCfg}
	cfg.setDefaults()
	loader := newToolLoader(sb, cfg)
	var tools []tool
	for _, spec := range append([]string{"fixtures=" + testenv.TestdataTools()}, dirs...) {
		ts, refused, err := loader.loadDir(ctx, parseToolDir(spec))
		require.NoError(t, err)
		require.Empty(t, refused)
		tools = append(tools, ts...)
	}
	pool := newMCPPool(testFrames, log, func() {})
	t.Cleanup(pool.close)
	return &Router{computers: newComputerManager(cfg.MCP, tools, nil, pool, log), log: log}
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

// logRecorder keeps what is logged, to check what the agent says.
type logRecorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *logRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func (r *logRecorder) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(r, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (r *logRecorder) contains(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Contains(r.buf.String(), s)
}

// requireIDs checks that each line logged with msg names the ids an
// operator greps for, with the values in ids, and that there is one.
func (r *logRecorder) requireIDs(t *testing.T, msg string, ids map[string]string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	found := false
	for line := range strings.Lines(r.buf.String()) {
		if !strings.Contains(line, fmt.Sprintf("msg=%q", msg)) {
			continue
		}
		found = true
		for k, v := range ids {
			assert.Contains(t, line, " "+k+"="+v+" ", "%q names %s", msg, k)
		}
	}
	require.True(t, found, "never logged %q", msg)
}
