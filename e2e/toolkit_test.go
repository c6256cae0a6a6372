package e2e

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trusting makes the agent trust the test key, load only toolDirs, and
// keep its own data dir, so that what is deployed to it stays with it.
func trusting(t *testing.T, toolDirs ...string) agentOption {
	return func(cfg *agent.Config) {
		cfg.TrustedKeys = []ed25519.PublicKey{testenv.TestKey(t)}
		cfg.ToolDirs = toolDirs
		cfg.DataDir = t.TempDir()
	}
}

// deviceTools lists a device's tools as the server knows them, by key.
func (c *cluster) deviceTools(id string) map[string]protocol.MCPToolInfo {
	c.t.Helper()
	var tools []protocol.MCPToolInfo
	require.NoError(c.t, c.api.Do(context.Background(), "GET", "/api/devices/"+id+"/tools", nil, &tools))
	out := map[string]protocol.MCPToolInfo{}
	for _, ti := range tools {
		out[ti.ToolKey] = ti
	}
	return out
}

func (c *cluster) deploy(id, fixture string) api.CommandResponse {
	c.t.Helper()
	resp, err := c.api.DeployTool(context.Background(), id, testenv.ReadSigned(c.t, fixture), "", 30*time.Second)
	require.NoError(c.t, err)
	return resp
}

func TestDeployingASignedToolLoadsItWithoutARestart(t *testing.T) {
	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), trusting(t))
	require.NotContains(t, c.deviceTools("kiosk-1"), "action::signed_echo")

	r := onlyResult(t, c.deploy("kiosk-1", "signed_echo"))
	require.Equal(t, protocol.ResultSuccess, r.Status, r.Error)

	// The agent registers again with its new inventory.
	require.Eventually(t, func() bool {
		_, ok := c.deviceTools("kiosk-1")["action::signed_echo"]
		return ok
	}, 10*time.Second, 20*time.Millisecond)
	info := c.deviceTools("kiosk-1")["action::signed_echo"]
	assert.Equal(t, "deployed", info.Namespace)
	assert.Equal(t, "1612c7e7b57e11e8", info.Meta["signer"])
	assert.Equal(t, "verified", info.Meta["signature"])
	assert.Len(t, info.Meta["sha256"], 64)

	out := onlyResult(t, c.exec("kiosk-1", "signed_echo", map[string]any{"deployed": true}, 10*time.Second))
	require.Equal(t, protocol.ResultSuccess, out.Status, out.Error)
	assert.Equal(t, map[string]any{"deployed": true}, out.Result)

	t.Run("a module that fails verification is refused and disturbs nothing", func(t *testing.T) {
		before := c.deviceTools("kiosk-1")
		requireFailure(t, c.deploy("kiosk-1", "tampered_echo"), "refused: signature does not match the module")
		requireFailure(t, c.deploy("kiosk-1", "unsigned_echo"), "refused: module is not signed")
		assert.Equal(t, before, c.deviceTools("kiosk-1"))
		out := onlyResult(t, c.exec("kiosk-1", "signed_echo", map[string]any{"still": "here"}, 10*time.Second))
		assert.Equal(t, protocol.ResultSuccess, out.Status, out.Error)
	})
}

func TestRefusedModulesAreReportedToTheServer(t *testing.T) {
	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), trusting(t, "signed="+testenv.SignedTools()))
	dev := c.device("kiosk-1")
	require.NotNil(t, dev.Info)
	refused, ok := dev.Info.CustomMetadata["refused_tools"].([]any)
	require.True(t, ok, "custom_metadata: %v", dev.Info.CustomMetadata)
	errs := map[string]string{}
	for _, r := range refused {
		m := r.(map[string]any)
		errs[m["path"].(string)] = m["error"].(string)
	}
	assert.Contains(t, errs[testenv.SignedTools()+"/unsigned_echo.wasm"], "module is not signed")
	assert.Contains(t, errs[testenv.SignedTools()+"/tampered_echo.wasm"], "signature does not match")
	assert.Contains(t, errs[testenv.SignedTools()+"/foreign_echo.wasm"], "signed by a key this host does not trust")
	assert.Contains(t, c.deviceTools("kiosk-1"), "action::signed_echo", "the signed module loaded")
}

func TestPolicyConfinesStockToolsOnADevice(t *testing.T) {
	c := newCluster(t)
	files, outside := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("secret"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(files, "link.txt")))
	grant := sandbox.Mount{HostPath: files, GuestPath: "/data"}
	readOnly := grant
	readOnly.ReadOnly = true
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), func(cfg *agent.Config) {
		cfg.ToolDirs = []string{"stock=" + testenv.StockToolsDir(t)}
		cfg.Mounts = []sandbox.Mount{grant}
		cfg.Policies = map[string]sandbox.Policy{"stock.write_file": {Dirs: []sandbox.Mount{readOnly}}}
	})

	info := c.deviceTools("kiosk-1")["action::write_file"]
	assert.Equal(t, map[string]any{"dirs": []any{map[string]any{"path": "/data", "mode": "ro"}}}, info.Meta["granted"])

	requireFailure(t, c.exec("kiosk-1", "read_file", map[string]any{"path": "/data/link.txt"}, 10*time.Second),
		`denied: open "/data/link.txt": leads outside the granted dir /data through a symbolic link`)
	requireFailure(t, c.exec("kiosk-1", "write_file", map[string]any{"path": "/data/new.txt", "content": "x"}, 10*time.Second),
		"open /data/new.txt: this tool was granted that directory read-only")
	assert.NoFileExists(t, filepath.Join(files, "new.txt"))
	// The server checks parameters with the agent's own schema checker,
	// before anything is sent.
	assert.Equal(t, []api.Problem{{Path: "actions[0].parameters.extra",
		Problem: `not allowed (additionalProperties is false), says the input schema of "read_file" on device "kiosk-1"`}},
		c.refusal("kiosk-1", "read_file", map[string]any{"path": "/data/a", "extra": 1}))
}
