package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testpki"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The CA and the device's certificate and key are keys of server, paths
// relative to the file, and a device certificate stands in for the token
// file.
func TestTLSFilesAreServerKeysAndFlags(t *testing.T) {
	ca := testpki.NewCA(t, "test CA")
	path := writeConfig(t, `
device: {id: kiosk-1}
server: {url: "wss://aip.example.net/ws", ca: ca.crt, cert: kiosk-1.crt, key: kiosk-1.key}
data_dir: data
`)
	dir := filepath.Dir(path)
	ca.WriteCA(t, dir, "ca")
	ca.Issue(t, testpki.Leaf{Name: "kiosk-1", Client: true}).Write(t, dir, "kiosk-1")
	cfg, err := fromCommandLine(t, "--config", path)
	require.NoError(t, err, "no token file: the certificate stands in for it")
	assert.Equal(t, filepath.Join(dir, "ca.crt"), cfg.CAFile)
	assert.Equal(t, filepath.Join(dir, "kiosk-1.crt"), cfg.CertFile)
	assert.Equal(t, filepath.Join(dir, "kiosk-1.key"), cfg.KeyFile)

	other := t.TempDir()
	otherCA, _ := testpki.NewCA(t, "other CA").WriteCA(t, other, "other")
	cfg, err = fromCommandLine(t, "--config", path, "--ca", otherCA)
	require.NoError(t, err)
	assert.Equal(t, otherCA, cfg.CAFile, "the flag overrides the file")
}

// A CA file or a certificate that does not read stops the agent at start,
// with the line or the flag.
func TestTLSFilesThatDoNotReadAreNamed(t *testing.T) {
	path := writeConfig(t, `
device: {id: kiosk-1}
server: {url: "wss://aip.example.net/ws", token_file: t, ca: missing.crt, cert: c.crt, key: c.key}
data_dir: data
`)
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(path), "c.crt"), []byte("not PEM"), 0o600))
	_, err := Load(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path+":3: server.ca: open "+filepath.Join(filepath.Dir(path), "missing.crt"))
	assert.Contains(t, err.Error(), path+":3: server.cert: certificate "+filepath.Join(filepath.Dir(path), "c.crt"))

	_, err = fromCommandLine(t, "--id", "k1", "--data", "d", "--token-file", "t", "--ca", path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--ca: "+path+": no PEM certificate in it")
}
