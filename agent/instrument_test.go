package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// invalidBodyPath is a signed module that passes every check the agent
// makes at load and fails wazero's validation, which instrumenting runs.
func invalidBodyPath() string {
	return filepath.Join(testenv.TestdataTools(), "invalid", "invalid_body.wasm")
}

// slowStartConfig is a config for dev-1 linked to url, on a fresh data
// dir, with one tools dir (namespace "tools") holding the example Go tool
// hash_file_go, a quarter of a second to instrument, and the modules named,
// which sort after it and so are instrumented after it. No MCP server
// holds up registration.
func slowStartConfig(t *testing.T, url string, modules ...string) Config {
	t.Helper()
	cfg := agentConfig(t, url)
	cfg.MCP = nil
	dir := filepath.Join(t.TempDir(), "tools")
	require.NoError(t, os.Mkdir(dir, 0o755))
	for _, src := range append([]string{testenv.GoTool(t)}, modules...) {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(src)), b, 0o644))
	}
	cfg.ToolDirs = []string{dir}
	return cfg
}

// registeredInfo reads the system_info of a REGISTER as the peer got it.
func registeredInfo(t *testing.T, m protocol.ClientMessage) map[string]any {
	t.Helper()
	require.Equal(t, protocol.ClientRegister, m.Type, "%+v", m)
	info, ok := m.Metadata[protocol.MetadataSystemInfo].(map[string]any)
	require.True(t, ok, "metadata has system_info: %v", m.Metadata)
	return info
}

func TestAModuleThatCannotBeInstrumentedIsRefusedAfterTheAgentRegisters(t *testing.T) {
	p := newTestPeer(t)
	cfg := slowStartConfig(t, p.url(), invalidBodyPath())
	ta := startAgent(t, cfg)
	l := p.next(t)
	first := registeredInfo(t, l.register)
	assert.Subset(t, inventory(t, l.register.Metadata), []string{"data_collection::hash_file_go", "action::invalid_body"},
		"the agent registers before its tools are instrumented, with all it loaded")
	assert.NotContains(t, first["custom_metadata"], "refused_tools")

	again := l.next(t)
	info := registeredInfo(t, again)
	assert.Contains(t, inventory(t, again.Metadata), "data_collection::hash_file_go")
	assert.NotContains(t, inventory(t, again.Metadata), "action::invalid_body", "registers again without it")
	refused := info["custom_metadata"].(map[string]any)["refused_tools"].([]any)
	require.Len(t, refused, 1)
	r := refused[0].(map[string]any)
	path := filepath.Join(cfg.ToolDirs[0], "invalid_body.wasm")
	assert.Equal(t, path, r["path"])
	assert.Contains(t, r["error"], `tool "invalid_body": module refused: instrument: invalid module`)
	assert.Contains(t, r["error"], "("+path+")")
	assert.True(t, ta.logs.Contains(`msg="tool refused" device=dev-1 path=`+path), "the refusal is logged with the module's path")

	m := newCommand("s1", action("invalid_body", nil))
	l.send(t, m)
	res := l.results(t, m.ResponseID)
	assert.Contains(t, res[0].Error, `unknown tool "invalid_body"`, "it is gone from the Computer")
}

func TestACommandThatComesBeforeItsToolIsInstrumentedWaitsAndRuns(t *testing.T) {
	p := newTestPeer(t)
	files := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(files, "f"), []byte("kiosk"), 0o644))
	cfg := slowStartConfig(t, p.url())
	cfg.Mounts = []sandbox.Mount{{HostPath: files, GuestPath: "/files", ReadOnly: true}}
	ta := startAgent(t, cfg)
	l := p.next(t)
	tool := ta.computers.FindBase("tools", "hash_file_go").(interface{ Ready(context.Context) error })
	require.ErrorIs(t, tool.Ready(canceledCtx()), sandbox.ErrCanceled, "hash_file_go is still being instrumented")

	m := newCommand("s1", protocol.Command{ToolName: "hash_file_go", Parameters: map[string]any{"path": "/files/f"}, CallID: "c1"})
	l.send(t, m)
	res := l.results(t, m.ResponseID)
	require.Equal(t, protocol.ResultSuccess, res[0].Status, res[0].Error)
	sum := sha256.Sum256([]byte("kiosk"))
	assert.Equal(t, hex.EncodeToString(sum[:]), res[0].Result.(map[string]any)["sha256"])
	require.NotEmpty(t, l.preparing, "the agent told the server it prepared the tool")
	assert.Equal(t, "hash_file_go", l.preparing[0].ToolName)
	assert.Equal(t, protocol.PreparingReady, l.preparing[len(l.preparing)-1].Stage, "and when it was ready")
}

func TestADeployedModuleThatCannotBeInstrumentedIsRefusedToTheOperator(t *testing.T) {
	data := t.TempDir()
	a := offlineAgent(t, data)
	wasm, err := os.ReadFile(invalidBodyPath())
	require.NoError(t, err)
	params, err := protocol.InstallToolParams(wasm, "")
	require.NoError(t, err)
	res := a.router.Execute(context.Background(), computer.Target{}, []protocol.Command{{ToolName: protocol.InstallToolName, Parameters: params}}, true)[0]
	assert.Equal(t, protocol.ResultFailure, res.Status)
	assert.Contains(t, res.Error, `install_tool: tool "invalid_body": module refused: instrument: invalid module`)
	assert.NoFileExists(t, filepath.Join(data, "tools", "deployed", "invalid_body.wasm"))
	assert.Empty(t, a.inventory, "the inventory did not change")
}

// A deployed reactor whose initialization never ends is refused to the
// operator, saying why, once its fuel runs out: the deploy never hangs.
func TestADeployedReactorWhoseInitializationSpinsIsRefusedToTheOperator(t *testing.T) {
	data := t.TempDir()
	a := offlineAgent(t, data)
	spin, err := os.ReadFile(filepath.Join(testenv.TestdataTools(), "reactor", "initspin.wasm"))
	require.NoError(t, err)
	wasm := packed(t, spin, manifest.Manifest{Name: "initspin", ToolType: manifest.ToolTypeAction,
		InputSchema: map[string]any{"type": "object"}, Limits: manifest.Limits{Fuel: 10_000_000}})
	res := installModule(t, a, wasm, "")
	assert.Equal(t, protocol.ResultFailure, res.Status)
	assert.Contains(t, res.Error, `install_tool: tool "initspin": module refused: initialization: out of fuel after`)
	assert.NoFileExists(t, filepath.Join(data, "tools", "deployed", "initspin.wasm"))
}

// canceledCtx is a context that has ended, to ask whether a tool is ready
// without waiting.
func canceledCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// On UFO's JSON wire the agent says nothing of a tool's preparation:
// UFO's models have no such message, and its servers keep their own
// deadlines. Over CBOR the same first command is preceded by notices.
func TestTheAgentTellsOfAToolsPreparationOnTheCBORWireOnly(t *testing.T) {
	for _, wire := range []protocol.Encoding{protocol.CBOR, protocol.JSON} {
		t.Run(wire.String(), func(t *testing.T) {
			p := newTestPeer(t)
			cfg := slowStartConfig(t, p.url())
			cfg.Wire = wire
			startAgent(t, cfg)
			l := p.next(t)
			m := newCommand("s1", protocol.Command{ToolName: "hash_file_go", Parameters: map[string]any{"path": "/nowhere"}, CallID: "c1"})
			l.send(t, m)
			l.results(t, m.ResponseID)
			if wire == protocol.JSON {
				assert.Empty(t, l.preparing)
			} else {
				assert.NotEmpty(t, l.preparing)
			}
		})
	}
}

// On a fresh data dir the agent first registers once its small tools
// (the stock tools, in C) are prepared: the first call of each finds its
// tool instrumented and initialized, at most to load its code again from
// the compile cache (which initializing left it in, to hand the memory
// back). A Go tool of megabytes is left to the background (the tests
// above).
func TestTheStockToolsAreReadyWhenTheAgentFirstRegisters(t *testing.T) {
	p := newTestPeer(t)
	cfg := agentConfig(t, p.url())
	cfg.ToolDirs = []string{"stock=" + testenv.StockToolsDir(t)}
	cfg.PrepareBeforeRegister = testenv.Slowdown * time.Minute // the bound is not what this test is about
	ta := startAgent(t, cfg)
	l := p.next(t)
	require.Equal(t, protocol.ClientRegister, l.register.Type)
	logs := ta.logs.String()
	prepared := strings.Index(logs, `msg="small tools prepared before registering" device=dev-1 count=4 `)
	require.GreaterOrEqual(t, prepared, 0, "%s", logs)
	assert.NotContains(t, logs[:prepared], "msg=registered", "the four stock tools were prepared before the agent registered")
	for i, name := range testenv.StockTools {
		m := newCommand(fmt.Sprintf("s%d", i), protocol.Command{ToolName: name, Parameters: map[string]any{"path": "/nowhere"}, CallID: "c1"})
		l.send(t, m)
		l.results(t, m.ResponseID)
	}
	for _, p := range l.preparing {
		assert.Contains(t, []string{"compiling", protocol.PreparingReady}, p.Stage, "%s was not prepared before the agent registered", p.ToolName)
	}
}
