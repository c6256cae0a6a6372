package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSeveralServersComeFromARepeatedFlagOrTheFilesList(t *testing.T) {
	cfg, err := fromCommandLine(t, "--id", "k1", "--token-file", "t", "--data", "d",
		"--server", "ws://a:8700/ws", "--server", "wss://b:8700/ws")
	require.NoError(t, err)
	assert.Equal(t, []string{"ws://a:8700/ws", "wss://b:8700/ws"}, cfg.Servers())
	cfg.SetDefaults()
	require.NoError(t, cfg.Check())

	cfg, err = fromCommandLine(t, "--id", "k1", "--token-file", "t", "--data", "d", "--server", "ws://a:8700/ws")
	require.NoError(t, err)
	assert.Equal(t, "ws://a:8700/ws", cfg.ServerURL, "one --server is the URL, as before")
	assert.Equal(t, []string{"ws://a:8700/ws"}, cfg.Servers())

	path := writeConfig(t, `
device: {id: k1}
server: {urls: ["ws://a:8700/ws", "ws://b:8700/ws"], token_file: t}
data_dir: d
`)
	cfg, err = fromCommandLine(t, "--config", path)
	require.NoError(t, err)
	assert.Equal(t, []string{"ws://a:8700/ws", "ws://b:8700/ws"}, cfg.Servers(), "the file's list replaces the default URL")
	cfg.SetDefaults()
	require.NoError(t, cfg.Check())

	cfg, err = fromCommandLine(t, "--config", path, "--server", "ws://c:8700/ws")
	require.NoError(t, err)
	assert.Equal(t, []string{"ws://c:8700/ws"}, cfg.Servers(), "--server replaces the file's servers, all of them")
}

func TestEveryServerURLIsCheckedAndURLWithURLsIsRefused(t *testing.T) {
	_, err := fromCommandLine(t, "--server", "ws://a:8700/ws", "--server", "http://b:8700/ws")
	assert.ErrorContains(t, err, `--server: "http://b:8700/ws": want ws://HOST/PATH or wss://HOST/PATH`)

	path := writeConfig(t, `
server:
  url: ws://a:8700/ws
  urls: [ws://b:8700/ws]
`)
	_, err = Load(path)
	assert.ErrorContains(t, err, path+":4: server.urls: give server.url or server.urls, not both")

	path = writeConfig(t, `
server:
  urls:
    - ws://a:8700/ws
    - tcp://b:8700
`)
	_, err = Load(path)
	assert.ErrorContains(t, err, path+`:5: server.urls[1]: "tcp://b:8700": want ws://HOST/PATH or wss://HOST/PATH`)

	cfg := Config{ID: "k1", TokenFile: "t", DataDir: "d", CAFile: "ca.pem",
		ServerURLs: []string{"wss://a:8700/ws", "ws://b:8700/ws"}}
	cfg.SetDefaults()
	assert.ErrorContains(t, cfg.Check(), `server URL "ws://b:8700/ws": a CA or a device certificate needs a wss:// URL`,
		"the CA and the certificate apply to every server")
	cfg.ServerURLs, cfg.ServerURL = []string{"wss://a:8700/ws"}, "wss://b:8700/ws"
	assert.ErrorContains(t, cfg.Check(), "not both")
}

// A URL no dial could ever use, or one given twice, fails the start,
// not a dial later.
func TestAServerURLWithoutHostOrPortOrGivenTwiceIsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--server", "ws://:8700/ws"}, `--server: "ws://:8700/ws": want ws://HOST/PATH or wss://HOST/PATH`},
		{[]string{"--server", "ws://a:99999/ws"}, `--server: "ws://a:99999/ws": port 99999: want 1-65535`},
		{[]string{"--server", "ws://a:8700/ws", "--server", "wss://b:0/ws"}, `--server: "wss://b:0/ws": port 0: want 1-65535`},
	} {
		_, err := fromCommandLine(t, tc.args...)
		assert.ErrorContains(t, err, tc.want, tc.args)
	}
	cfg, err := fromCommandLine(t, "--id", "k1", "--token-file", "t", "--data", "d",
		"--server", "ws://a:8700/ws?token=secret-token", "--server", "ws://b:8700/ws", "--server", "ws://a:8700/ws?token=secret-token")
	require.NoError(t, err)
	cfg.SetDefaults()
	assert.EqualError(t, cfg.Check(), `server URL "ws://a:8700/ws?token=REDACTED": given twice`)

	path := writeConfig(t, `
device: {id: k1}
server: {urls: ["ws://a:8700/ws", "ws://a:8700/ws"], token_file: t}
data_dir: d
`)
	cfg, err = fromCommandLine(t, "--config", path)
	require.NoError(t, err)
	cfg.SetDefaults()
	assert.EqualError(t, cfg.Check(), `server URL "ws://a:8700/ws": given twice`)

	path = writeConfig(t, `
device: {id: k1}
server: {urls: [], token_file: t}
`)
	_, err = Load(path)
	assert.ErrorContains(t, err, path+`:3: server.urls: empty: give at least one ws:// or wss:// URL`)
}
