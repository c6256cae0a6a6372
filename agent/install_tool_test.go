package agent

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/agent/internal/logtest"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// offlineAgent is an agent that trusts the test key and never connects:
// enough to drive its Computer directly.
func offlineAgent(t *testing.T, data string, toolDirs ...string) *Agent {
	t.Helper()
	return newOfflineAgent(t, Config{DataDir: data, ToolDirs: toolDirs, TrustedKeys: []ed25519.PublicKey{testenv.TestKey(t)}})
}

func newOfflineAgent(t *testing.T, cfg Config) *Agent {
	t.Helper()
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte("aipd_test"), 0o600))
	ctx := context.Background()
	cfg.ID, cfg.ServerURL, cfg.TokenFile = "kiosk-1", "ws://127.0.0.1:1/ws", token
	cfg.Logger = logtest.Quiet
	a, err := New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close(ctx) })
	return a
}

func install(t *testing.T, a *Agent, fixture, namespace string) protocol.Result {
	t.Helper()
	return installModule(t, a, testenv.ReadSigned(t, fixture), namespace)
}

func installModule(t *testing.T, a *Agent, wasm []byte, namespace string) protocol.Result {
	t.Helper()
	params, err := protocol.InstallToolParams(wasm, namespace)
	require.NoError(t, err)
	return a.router.Execute(context.Background(), computer.Target{}, []protocol.Command{{ToolName: protocol.InstallToolName, Parameters: params}}, true)[0]
}

func run(a *Agent, tool string, params map[string]any) protocol.Result {
	return a.router.Execute(context.Background(), computer.Target{}, []protocol.Command{{ToolName: tool, Parameters: params}}, true)[0]
}

func TestInstalledToolIsKeptLoadedAndAnnounced(t *testing.T) {
	data := t.TempDir()
	a := offlineAgent(t, data)
	res := install(t, a, "signed_echo", "")
	require.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
	info := res.Result.(map[string]any)["tool"].(protocol.MCPToolInfo)
	assert.Equal(t, "deployed", info.Namespace)
	assert.Equal(t, "1612c7e7b57e11e8", info.Meta["signer"])
	assert.Equal(t, false, res.Result.(map[string]any)["replaced"])
	assert.FileExists(t, filepath.Join(data, "tools", "deployed", "signed_echo.wasm"))
	assert.Len(t, a.inventory, 1, "the link is told to send the new inventory")

	out := run(a, "signed_echo", map[string]any{"hello": "kiosk"})
	require.Equal(t, protocol.ResultSuccess, out.Status, out.Error)
	assert.Equal(t, map[string]any{"hello": "kiosk"}, out.Result)

	again := install(t, a, "signed_echo", "")
	require.Equal(t, protocol.ResultSuccess, again.Status, again.Error)
	assert.Equal(t, true, again.Result.(map[string]any)["replaced"])

	a.Close(context.Background())
	restarted := offlineAgent(t, data)
	out = run(restarted, "signed_echo", map[string]any{"after": "restart"})
	require.Equal(t, protocol.ResultSuccess, out.Status, out.Error)
}

func TestAnActionWhoseToolIsReplacedWhileItsCommandRunsRunsOnTheNewVersion(t *testing.T) {
	a := offlineAgent(t, t.TempDir())
	require.Equal(t, protocol.ResultSuccess, install(t, a, "signed_echo", "").Status)
	params, err := protocol.InstallToolParams(testenv.ReadSigned(t, "signed_echo"), "")
	require.NoError(t, err)
	// Both actions are resolved before the first deploys signed_echo again
	// and closes the version the second was resolved to.
	res := a.router.Execute(context.Background(), computer.Target{}, []protocol.Command{
		{ToolName: protocol.InstallToolName, Parameters: params},
		{ToolName: "signed_echo", Parameters: map[string]any{"after": "replace"}},
	}, true)
	require.Equal(t, protocol.ResultSuccess, res[0].Status, res[0].Error)
	require.Equal(t, true, res[0].Result.(map[string]any)["replaced"])
	require.Equal(t, protocol.ResultSuccess, res[1].Status, res[1].Error)
	assert.Equal(t, map[string]any{"after": "replace"}, res[1].Result)
}

func TestARefusedModuleDisturbsNothing(t *testing.T) {
	data := t.TempDir()
	a := offlineAgent(t, data)
	require.Equal(t, protocol.ResultSuccess, install(t, a, "signed_echo", "").Status)
	before := defaultComputer(t, a).ListTools("", "", false)

	for fixture, want := range map[string]string{
		"tampered_echo": "signature does not match the module",
		"unsigned_echo": "module is not signed",
		"foreign_echo":  "signed by a key this host does not trust",
	} {
		res := install(t, a, fixture, "")
		assert.Equal(t, protocol.ResultFailure, res.Status, fixture)
		assert.Contains(t, res.Error, "install_tool: tool \""+fixture+"\" (deployed module): refused: "+want, fixture)
		assert.NoFileExists(t, filepath.Join(data, "tools", "deployed", fixture+".wasm"))
	}
	assert.Equal(t, before, defaultComputer(t, a).ListTools("", "", false))
	out := run(a, "signed_echo", map[string]any{"still": "here"})
	assert.Equal(t, protocol.ResultSuccess, out.Status, out.Error)
}

func TestInstallRefusesNamespacesOfToolDirsAndTakenKeys(t *testing.T) {
	a := offlineAgent(t, t.TempDir(), "signed="+testenv.SignedTools())
	res := install(t, a, "signed_echo", "signed")
	assert.Contains(t, res.Error, `namespace "signed" is loaded from the tools dir`)

	res = install(t, a, "signed_echo", "other")
	assert.Contains(t, res.Error, `tool action::signed_echo is already registered by namespace "signed"`)

	res = install(t, a, "signed_echo", "../up")
	assert.Contains(t, res.Error, `namespace "../up"`)
	res = install(t, a, "signed_echo", "computer")
	assert.Contains(t, res.Error, `namespace "computer"`)
}

func TestInstallNeedsATrustedSigner(t *testing.T) {
	optional := false
	lax := newOfflineAgent(t, Config{DataDir: t.TempDir(), TrustedKeys: []ed25519.PublicKey{testenv.TestKey(t)}, RequireSigned: &optional})
	res := install(t, lax, "unsigned_echo", "")
	assert.Contains(t, res.Error, `tool "unsigned_echo" (deployed module): refused: module is not signed`, "require_signed=false is for local modules only")

	res = install(t, newOfflineAgent(t, Config{DataDir: t.TempDir()}), "signed_echo", "")
	assert.Contains(t, res.Error, "this agent trusts no key (--trusted-key), and a deployed module must be signed by one")
}

func TestDeployedToolsThatClashWithToolDirsAreRefusedAtStart(t *testing.T) {
	data := t.TempDir()
	first := offlineAgent(t, data)
	require.Equal(t, protocol.ResultSuccess, install(t, first, "signed_echo", "").Status)
	first.Close(context.Background())
	// The operator later adds a tools dir with a tool of the same key.
	a := offlineAgent(t, data, "signed="+testenv.SignedTools())
	var clash string
	for _, r := range a.tools.Refusals() {
		if strings.HasSuffix(r.Path, filepath.Join("deployed", "signed_echo.wasm")) {
			clash = r.Error
		}
	}
	assert.Contains(t, clash, `tool action::signed_echo of namespace "deployed": the key is already registered by namespace "signed"`)
	assert.Equal(t, protocol.ResultSuccess, run(a, "signed_echo", nil).Status, "the tools dir's version serves")
}

func TestRefusedModulesAreReportedAtRegistration(t *testing.T) {
	a := offlineAgent(t, t.TempDir(), "signed="+testenv.SignedTools())
	info := a.systemInfo()
	refused := info.CustomMetadata["refused_tools"].([]any)
	require.Len(t, refused, 3)
	var paths []string
	for _, r := range refused {
		m := r.(map[string]any)
		paths = append(paths, filepath.Base(m["path"].(string)))
		assert.Contains(t, m["error"], "refused:")
	}
	assert.ElementsMatch(t, []string{"foreign_echo.wasm", "tampered_echo.wasm", "unsigned_echo.wasm"}, paths)
}

// defaultComputer is the Computer of commands that name no agent.
func defaultComputer(t *testing.T, a *Agent) *computer.Computer {
	t.Helper()
	c, err := a.computers.Get(context.Background(), computer.Target{})
	require.NoError(t, err)
	return c
}
