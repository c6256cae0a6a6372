package config

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeConfig writes yaml as agent.yaml in a fresh dir and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	return path
}

func TestTheExampleConfigLoadsAsDocumented(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "agent.example.yaml"))
	require.NoError(t, err)
	// Temporary dirs stand for those the file names, which must exist.
	kiosk, stock, kioskTools := t.TempDir(), t.TempDir(), t.TempDir()
	path := writeConfig(t, strings.NewReplacer("/srv/kiosk", kiosk, "/usr/lib/aip-agent/tools", stock,
		"/opt/kiosk/tools", kioskTools).Replace(string(example)))
	dir := filepath.Dir(path)
	key, err := os.ReadFile(filepath.Join(testenv.Root(), "testdata", "keys", "test.pub"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ops.pub"), key, 0o600))

	cfg, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, "kiosk-1", cfg.ID)
	assert.Equal(t, map[string]string{"site": "lobby", "floor": "2"}, cfg.Labels)
	assert.Equal(t, "ws://aip.example.net:8700/ws", cfg.ServerURL)
	assert.Equal(t, filepath.Join(dir, "kiosk-1.token"), cfg.TokenFile, "relative to the file")
	assert.Equal(t, protocol.CBOR, cfg.Wire)
	assert.Zero(t, cfg.HeartbeatInterval, "none on cbor: the link's pings keep it")
	assert.Equal(t, protocol.ConnOptions{PingInterval: 50 * time.Second, MaxFrameBytes: 4 << 20}, cfg.Conn)
	assert.Equal(t, "/var/lib/aip-agent", cfg.DataDir)
	assert.Equal(t, 8, cfg.MaxConcurrentCommands)
	assert.Equal(t, 10*time.Second, cfg.ShutdownGrace)
	assert.Equal(t, OutboxLimits{MaxBytes: 16 << 20, MaxAge: 168 * time.Hour}, cfg.Outbox)
	assert.Equal(t, CacheLimits{MaxBytes: 256 << 20, MaxAge: 720 * time.Hour}, cfg.CompileCacheLimits)
	assert.Equal(t, []string{stock, "kiosk=" + kioskTools}, cfg.ToolDirs)
	assert.Equal(t, []sandbox.Mount{{HostPath: kiosk, GuestPath: "/data", ReadOnly: true}}, cfg.Mounts)
	assert.Equal(t, []string{"TZ"}, cfg.AllowEnv)
	assert.Equal(t, []ed25519.PublicKey{testenv.TestKey(t)}, cfg.TrustedKeys)
	require.NotNil(t, cfg.RequireSigned)
	assert.True(t, *cfg.RequireSigned)
	assert.Equal(t, map[string]sandbox.Policy{
		"kiosk":        {Dirs: []sandbox.Mount{{HostPath: kiosk, GuestPath: "/data"}}, Env: []string{"TZ", "LANG"}},
		"kiosk.reboot": {Limits: sandbox.Limits{Timeout: 5 * time.Second}},
	}, cfg.Policies)
	assert.Equal(t, sandbox.Limits{Timeout: 30 * time.Second, MemoryPages: 1024, StdoutBytes: 1 << 20, StderrBytes: 64 << 10, Fuel: 10_000_000_000}, cfg.Limits)
	assert.Equal(t, 4, cfg.MaxConcurrentCalls)
	assert.Equal(t, uint64(256<<20), cfg.MaxReservedMemory)
	assert.Equal(t, 5*time.Minute, cfg.UnloadAfter)
	assert.False(t, cfg.Reproducible)
	assert.Equal(t, int64(64<<20), cfg.MemoryLimit)
	assert.Equal(t, MCPConfig{"default": {"default": {
		Action: []MCPServerConfig{{Namespace: "browser", Type: MCPStdio, Command: "node",
			StartArgs: []string{"/opt/mcp/node_modules/@playwright/mcp/cli.js", "--headless",
				"--executable-path", "/usr/bin/chromium", "--isolated", "--no-sandbox"},
			Env: map[string]string{"DISPLAY": ":0"}, Cwd: "/opt/mcp", Timeout: 60 * time.Second}},
		DataCollection: []MCPServerConfig{{Namespace: "sensors", Type: MCPHTTP, URL: "http://localhost:8931/mcp"}},
	}}}, cfg.MCP)
	assert.Equal(t, MCPServe{Listen: "127.0.0.1:8932", TokenFile: filepath.Join(dir, "mcp-serve.token"), MaxSessions: 64}, cfg.MCPServe)
}

func TestAnInvalidConfigNamesTheLineAndTheProblem(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown field": {"device:\n  id: k1\n  colour: red\n",
			`agent.yaml:3: device.colour: unknown field`},
		"unknown field deep down": {"mcp:\n  default:\n    default:\n      action:\n        - namespace: ui\n          type: http\n          urll: 'http://x/mcp'\n",
			`agent.yaml:7: mcp.default.default.action[0].urll: unknown field; did you mean mcp.default.default.action[0].url?`},
		"unknown section": {"device: {id: k1}\nbogus: 1\n",
			`agent.yaml:2: bogus: unknown field`},
		"tool dir": {"tools:\n  dirs:\n    - /nonexistent/tools\n",
			`agent.yaml:3: tools.dirs[0]: stat /nonexistent/tools: no such file or directory`},
		"named tool dir": {"tools:\n  dirs: [ok=.,\n    kiosk=/nonexistent/tools]\n",
			`agent.yaml:3: tools.dirs[1]: stat /nonexistent/tools: no such file or directory`},
		"tool dir that is a file": {"tools:\n  dirs: [agent.yaml]\n",
			`agent.yaml is not a directory`},
		"duration without a unit": {"server:\n  heartbeat: 20\n",
			`agent.yaml:2: "20" is not a duration such as 30s or 5m`},
		"size that is not one": {"outbox:\n  max_bytes: lots\n",
			`agent.yaml:2: "lots" is not a size such as 16MiB or 65536`},
		"wire": {"server:\n  url: ws://x/ws\n  wire: xml\n",
			`agent.yaml:3: server.wire: want cbor or json, got "xml"`},
		"device id": {"device:\n  id: ../etc\n",
			`agent.yaml:2: device.id: "../etc": want 1-64 of [A-Za-z0-9._-]`},
		"allow dir": {"tools:\n  allow_dirs:\n    - /nonexistent/kiosk:/data\n",
			`agent.yaml:3: tools.allow_dirs[0]: mount "/nonexistent/kiosk:/data": stat /nonexistent/kiosk: no such file or directory`},
		"memory below a page": {"tools:\n  limits:\n    memory: 1KiB\n",
			`agent.yaml:3: tools.limits.memory: 1024 bytes is less than one 64 KiB page`},
		"trusted key": {"tools:\n  trusted_keys:\n    - /nonexistent/ops.pub\n",
			`agent.yaml:3: tools.trusted_keys[0]: `},
		"policy name": {"tools:\n  policies:\n    kiosk.read.file:\n      env: [TZ]\n",
			`agent.yaml:3: tools.policies.kiosk.read.file: "kiosk.read.file": want NAMESPACE or NAMESPACE.TOOL`},
		"env name": {"tools:\n  allow_env: [TZ, 'NOT A NAME']\n",
			`agent.yaml:2: tools.allow_env[1]: "NOT A NAME" is not an environment variable name`},
		"mcp server type": {"mcp:\n  HostAgent:\n    default:\n      action:\n        - namespace: ui\n          type: local\n",
			`agent.yaml:6: mcp.HostAgent.default.action[0].type: want stdio or http, got "local"`},
		"stdio without a command": {"mcp:\n  default:\n    default:\n      data_collection:\n        - namespace: ui\n          type: stdio\n",
			`agent.yaml:5: mcp.default.default.data_collection[0]: command is required for a stdio server`},
		"http with a command": {"mcp:\n  default:\n    default:\n      action:\n        - {namespace: ui, type: http, url: 'http://x/mcp', command: node}\n",
			`agent.yaml:5: mcp.default.default.action[0]: command, start_args, env and cwd are for stdio servers`},
		"namespace defined twice": {"mcp:\n  A:\n    default:\n      action:\n        - {namespace: ui, type: http, url: 'http://x/mcp'}\n" +
			"  B:\n    default:\n      action:\n        - {namespace: ui, type: http, url: 'http://y/mcp'}\n",
			`agent.yaml:9: mcp.B.default.action[0]: namespace "ui" is defined at line 5 with other settings`},
		"a list for a map": {"mcp:\n  default: [1, 2]\n",
			`agent.yaml:2: cannot unmarshal !!seq`},
		"server url": {"server:\n  url: not a url\n",
			`agent.yaml:2: server.url: "not a url": want ws://HOST/PATH or wss://HOST/PATH`},
		"server url without a host": {"server:\n  url: 'ws:///ws'\n",
			`agent.yaml:2: server.url: "ws:///ws": want ws://HOST/PATH or wss://HOST/PATH`},
		"server url over http": {"server:\n  url: 'http://aip:8700/ws'\n",
			`agent.yaml:2: server.url: "http://aip:8700/ws": want ws://HOST/PATH or wss://HOST/PATH`},
		"ping too slow for the dead-link promise": {"server:\n  url: ws://x/ws\n  ping: 90s\n",
			`agent.yaml:3: server.ping: 1m30s: at most 50s, so that a dead link is noticed within 60s`},
		"outbox max_age too short to deduplicate": {"outbox:\n  max_age: 30m\n",
			`agent.yaml:2: outbox.max_age: 30m0s: at least 24h, as long as the server may send a command again`},
		"outbox max_bytes under the frame cap": {"outbox:\n  max_bytes: 1MiB\n",
			`agent.yaml:2: outbox.max_bytes: 1048576 bytes: at least the frame cap, 4194304 bytes (server.max_frame)`},
		"outbox max_bytes under a larger frame cap": {"server:\n  max_frame: 32MiB\noutbox:\n  max_bytes: 16MiB\n",
			`agent.yaml:4: outbox.max_bytes: 16777216 bytes: at least the frame cap, 33554432 bytes (server.max_frame)`},
		"mcp_serve without a host": {"mcp_serve:\n  listen: ':8932'\n",
			`agent.yaml:2: mcp_serve.listen: ":8932": give the host: 127.0.0.1 for applications on the device only`},
		"mcp_serve without a port": {"mcp_serve:\n  listen: localhost\n",
			`agent.yaml:2: mcp_serve.listen: "localhost": want HOST:PORT`},
		"mcp_serve with negative sessions": {"mcp_serve:\n  max_sessions: -1\n",
			`agent.yaml:2: mcp_serve.max_sessions: -1: want a number of sessions, or 0 for the default`},
		// The YAML library gives the line of the flow it was parsing.
		"bad YAML": {"device:\n  id: [k1\n",
			`did not find expected ',' or ']'`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(writeConfig(t, tc.yaml))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "struct {", "no Go type")
		})
	}
}

func TestAConfigWithEveryProblemReportsEachOne(t *testing.T) {
	_, err := Load(writeConfig(t, "server:\n  wire: xml\ncommands:\n  max_concurrent: -1\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "agent.yaml:2: server.wire")
	assert.Contains(t, err.Error(), "agent.yaml:4: commands.max_concurrent: must not be negative")
}

func TestAConfigWithinTheBoundsLoads(t *testing.T) {
	cfg, err := Load(writeConfig(t, "server:\n  url: 'wss://aip.example.net/ws'\n  ping: 22s\n  max_frame: 1MiB\n"+
		"outbox:\n  max_age: 24h\n  max_bytes: 1MiB\n"))
	require.NoError(t, err)
	assert.Equal(t, 22*time.Second, cfg.Conn.PingInterval)
	assert.Equal(t, OutboxLimits{MaxBytes: 1 << 20, MaxAge: 24 * time.Hour}, cfg.Outbox)
}

func TestASharedCompileCacheIsFoundRelativeToTheFile(t *testing.T) {
	path := writeConfig(t, "compile_cache: shared-cache\n")
	cfg, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(filepath.Dir(path), "shared-cache"), cfg.CompileCacheDir)
}
