package config

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fromCommandLine parses args as aip-agent does and returns its config.
func fromCommandLine(t *testing.T, args ...string) (Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("aip-agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f Flags
	f.Register(fs)
	require.NoError(t, fs.Parse(args))
	return f.Config()
}

func TestFlagsThatAreSetOverrideTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"file-tools", "flag-tools"} {
		require.NoError(t, os.Mkdir(filepath.Join(dir, d), 0o755))
	}
	path := writeConfig(t, `
device: {id: from-file}
server: {url: "ws://file:8700/ws", token_file: file.token, wire: json, heartbeat: 5s}
data_dir: data
tools: {dirs: [`+filepath.Join(dir, "file-tools")+`], max_calls: 3}
`)
	cfg, err := fromCommandLine(t, "--config", path, "--id", "from-flag", "--tools", filepath.Join(dir, "flag-tools"))
	require.NoError(t, err)
	assert.Equal(t, "from-flag", cfg.ID)
	assert.Equal(t, []string{filepath.Join(dir, "flag-tools")}, cfg.ToolDirs)
	assert.Equal(t, "ws://file:8700/ws", cfg.ServerURL, "a flag not given does not override")
	assert.Equal(t, protocol.JSON, cfg.Wire)
	assert.Equal(t, 5*time.Second, cfg.HeartbeatInterval)
	assert.Equal(t, 3, cfg.MaxConcurrentCalls)
	assert.Equal(t, filepath.Join(filepath.Dir(path), "file.token"), cfg.TokenFile)
	assert.Equal(t, filepath.Join(filepath.Dir(path), "data"), cfg.DataDir)

	cfg, err = fromCommandLine(t, "--config", path, "--wire", "cbor", "--heartbeat", "1s", "--require-signed=false")
	require.NoError(t, err)
	assert.Equal(t, protocol.CBOR, cfg.Wire, "cbor, the zero value, is a choice too")
	assert.Equal(t, time.Second, cfg.HeartbeatInterval)
	require.NotNil(t, cfg.RequireSigned)
	assert.False(t, *cfg.RequireSigned)
}

func TestWithoutAConfigFileTheFlagsAndTheirDefaultsApply(t *testing.T) {
	cfg, err := fromCommandLine(t, "--id", "k1", "--token-file", "t", "--data", "d", "--wire", "json", "--max-call-memory", "128MiB")
	require.NoError(t, err)
	assert.Equal(t, DefaultServerURL, cfg.ServerURL)
	assert.Equal(t, protocol.JSON, cfg.Wire)
	assert.Equal(t, "t", cfg.TokenFile, "relative to where the agent runs")
	assert.Equal(t, uint64(128<<20), cfg.MaxReservedMemory)
	assert.Nil(t, cfg.RequireSigned, "required once a key is trusted")
	cfg.SetDefaults()
	assert.Equal(t, 20*time.Second, cfg.HeartbeatInterval)
	assert.Equal(t, CacheLimits{MaxBytes: 256 << 20, MaxAge: 30 * 24 * time.Hour}, cfg.CompileCacheLimits)

	_, err = fromCommandLine(t, "--wire", "xml")
	assert.ErrorContains(t, err, `--wire: want cbor or json, got "xml"`)
}

func TestAFlagIsParsedAndRefusedAsItsKeyInTheFileIs(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"device id":   {[]string{"--id", "../etc"}, `--id: "../etc": want 1-64 of [A-Za-z0-9._-]`},
		"server url":  {[]string{"--server", "http://aip:8700/ws"}, `--server: "http://aip:8700/ws": want ws://HOST/PATH or wss://HOST/PATH`},
		"allow dir":   {[]string{"--allow-dir", "/nonexistent/kiosk:/data"}, `--allow-dir: mount "/nonexistent/kiosk:/data": stat /nonexistent/kiosk: no such file or directory`},
		"tool dir":    {[]string{"--tools", "/nonexistent/tools"}, `--tools: stat /nonexistent/tools: no such file or directory`},
		"trusted key": {[]string{"--trusted-key", "/nonexistent/ops.pub"}, `--trusted-key: `},
		"env name":    {[]string{"--allow-env", "NOT A NAME"}, `--allow-env: "NOT A NAME" is not an environment variable name`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := fromCommandLine(t, tc.args...)
			assert.ErrorContains(t, err, tc.want)
		})
	}

	fs := flag.NewFlagSet("aip-agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f Flags
	f.Register(fs)
	assert.ErrorContains(t, fs.Parse([]string{"--heartbeat", "20"}), `"20" is not a duration such as 30s or 5m`)
	assert.ErrorContains(t, fs.Parse([]string{"--max-call-memory", "lots"}), `"lots" is not a size such as 16MiB or 65536`)
}

func TestAnInvalidConfigFileFailsNamingItsLine(t *testing.T) {
	path := writeConfig(t, "device:\n  id: k1\nserver:\n  wire: xml\n")
	_, err := fromCommandLine(t, "--config", path)
	assert.ErrorContains(t, err, "agent.yaml:4: server.wire: want cbor or json")
}

func TestARequiredKeyMissingFromTheFileNamesItsFieldAndFlag(t *testing.T) {
	path := writeConfig(t, "server: {url: \"ws://file:8700/ws\"}\n")
	_, err := fromCommandLine(t, "--config", path)
	require.Error(t, err)
	for _, want := range []string{
		path + ": device.id: missing (or --id)",
		path + ": server.token_file: missing (or --token-file; or a device certificate, --cert and --key)",
		path + ": data_dir: missing (or --data)",
	} {
		assert.Contains(t, err.Error(), want)
	}

	_, err = fromCommandLine(t, "--config", path, "--id", "k1", "--token-file", "t", "--data", "d")
	assert.NoError(t, err, "the flags supply them")

	_, err = fromCommandLine(t)
	assert.ErrorContains(t, err, "--id: missing (or device.id in a --config file)", "without a file, the flag is named")
}

func TestMergeLaysEachSetFieldOver(t *testing.T) {
	base := Config{ID: "a", Labels: map[string]string{"site": "lobby"}, Conn: protocol.ConnOptions{PingInterval: time.Second, MaxFrameBytes: 1 << 20}}
	got := base.Merge(Config{ID: "b", Conn: protocol.ConnOptions{MaxFrameBytes: 2 << 20}})
	assert.Equal(t, "b", got.ID)
	assert.Equal(t, map[string]string{"site": "lobby"}, got.Labels, "what the other leaves unset stays")
	assert.Equal(t, protocol.ConnOptions{PingInterval: time.Second, MaxFrameBytes: 2 << 20}, got.Conn, "field by field within a struct")
	assert.Equal(t, "a", base.ID, "the receiver is not changed")

	json := Config{Wire: protocol.JSON}
	assert.Equal(t, protocol.JSON, Default().Merge(json).Wire)
	assert.Equal(t, protocol.JSON, json.Merge(Config{}).Wire, "a Config that does not say CBOR keeps JSON")
}
