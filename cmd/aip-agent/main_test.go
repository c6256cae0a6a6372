package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFlagsThatAreSetOverrideTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "file-tools"), 0o755))
	path := filepath.Join(dir, "agent.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
device: {id: from-file}
server: {url: "ws://file:8700/ws", token_file: file.token, wire: json, heartbeat: 5s}
data_dir: data
tools: {dirs: [file-tools]}
`), 0o600))
	f := flags{config: path, server: defaultServer, id: "from-flag", wire: "cbor", heartbeat: 20 * time.Second,
		tools: listFlag{"flag-tools"}}
	cfg, err := configure(f, map[string]bool{"id": true, "tools": true})
	require.NoError(t, err)
	assert.Equal(t, "from-flag", cfg.ID)
	assert.Equal(t, []string{"flag-tools"}, cfg.ToolDirs)
	assert.Equal(t, "ws://file:8700/ws", cfg.ServerURL, "a flag left at its default does not override")
	assert.Equal(t, protocol.JSON, cfg.Wire)
	assert.Equal(t, 5*time.Second, cfg.HeartbeatInterval)
	assert.Equal(t, filepath.Join(dir, "file.token"), cfg.TokenFile)
	assert.Equal(t, filepath.Join(dir, "data"), cfg.DataDir)
}

func TestWithoutAConfigFileTheFlagsAndTheirDefaultsApply(t *testing.T) {
	cfg, err := configure(flags{server: defaultServer, id: "k1", tokenFile: "t", data: "d", wire: "json", heartbeat: time.Second}, map[string]bool{"id": true})
	require.NoError(t, err)
	assert.Equal(t, defaultServer, cfg.ServerURL)
	assert.Equal(t, protocol.JSON, cfg.Wire)
	assert.Equal(t, time.Second, cfg.HeartbeatInterval)

	_, err = configure(flags{wire: "xml"}, nil)
	assert.ErrorContains(t, err, `--wire: want cbor or json, got "xml"`)
}

func TestAnInvalidConfigFileFailsNamingItsLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.yaml")
	require.NoError(t, os.WriteFile(path, []byte("device:\n  id: k1\nserver:\n  wire: xml\n"), 0o600))
	_, err := configure(flags{config: path}, nil)
	assert.ErrorContains(t, err, "agent.yaml:4: server.wire: want cbor or json")
}

func TestARequiredKeyMissingFromTheFileNamesItsFieldAndFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.yaml")
	require.NoError(t, os.WriteFile(path, []byte("server: {url: \"ws://file:8700/ws\"}\n"), 0o600))
	_, err := configure(flags{config: path}, nil)
	require.Error(t, err)
	for _, want := range []string{
		path + ": device.id: missing (or --id)",
		path + ": server.token_file: missing (or --token-file)",
		path + ": data_dir: missing (or --data)",
	} {
		assert.Contains(t, err.Error(), want)
	}

	_, err = configure(flags{config: path, id: "k1", tokenFile: "t", data: "d"}, map[string]bool{"id": true, "token-file": true, "data": true})
	assert.NoError(t, err, "the flags supply them")

	_, err = configure(flags{server: defaultServer, wire: "cbor"}, nil)
	assert.ErrorContains(t, err, "--id: missing", "without a file, the flag is named")
}
