package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Rotating a token and signing certificates, against a server over TLS
// whose CA aipctl is given with --ca or AIP_CA.
func TestDeviceCredentialCommands(t *testing.T) {
	f := newFleet(t, map[string]map[string]string{"kiosk-1": lobby}, overTLS(t))

	out, errOut, code := f.ctl("device", "rotate", "kiosk-1")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "kiosk-1: token rotated; the old one no longer works\n", out)
	out, errOut, code = f.ctl("device", "rotate", "kiosk-1", "--grace", "1h")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "kiosk-1: token rotated; the old one works for 1h0m0s more\n", out)
	_, errOut, code = f.ctl("exec", "kiosk-1", "echo")
	assert.Equal(t, exitOK, code, "the link that carried the rotations goes on: %s", errOut)

	_, err := f.api.Enroll(t.Context(), api.EnrollRequest{ID: "kiosk-off"})
	require.NoError(t, err)
	out, errOut, code = f.ctl("device", "rotate", "kiosk-off")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "kiosk-off: rotation pending; the device keeps its old token until it next connects, and gets a new one then\n", out)
	_, errOut, code = f.ctl("device", "rotate", "kiosk-off", "--grace", "soon")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `field "grace": "soon" is not a duration`)

	out, errOut, code = f.ctl("device", "enroll", "kiosk-5", "--csr", f.csr())
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, []string{"kiosk-5.devices.edgeaip"}, certOf(t, out).DNSNames)
	out, errOut, code = f.ctl("device", "certificate", "kiosk-5", "--csr", f.csr())
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, []string{"kiosk-5.devices.edgeaip"}, certOf(t, out).DNSNames)
	_, errOut, code = f.ctl("device", "certificate", "kiosk-5")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--csr is required")

	noCA := slices.Clone(f.flags[:len(f.flags)-2])
	_, errOut, code = ctl(t, append(noCA, "devices")...)
	assert.Equal(t, exitUnreachable, code)
	assert.Contains(t, errOut, "the server's certificate is not trusted: give the CA that signed it with --ca or AIP_CA")
	t.Setenv("AIP_CA", f.ca)
	_, errOut, code = ctl(t, append(noCA, "devices")...)
	assert.Equal(t, exitOK, code, errOut)
}

// certOf parses the one PEM certificate of out.
func certOf(t *testing.T, out string) *x509.Certificate {
	t.Helper()
	block, rest := pem.Decode([]byte(out))
	require.NotNil(t, block, "no PEM in %q", out)
	assert.Empty(t, rest)
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}

// Item 8 of issue 43: enroll --out writes the token to a new file, mode
// 0600 whatever the umask, and refuses one that exists before it asks the
// server anything; a shell's > would have left it readable by everyone.
func TestEnrollOutWritesThePrivateTokenFileAndNeverReplacesOne(t *testing.T) {
	f := newFleet(t, nil)
	dir := t.TempDir()
	out, errOut, code := sh(t, f, "umask 022 && cd "+dir+" && aipctl device enroll kiosk-1 --label site=lobby --out kiosk-1.token")
	require.Equal(t, exitOK, code, errOut)
	assert.Empty(t, out)
	assert.Equal(t, "wrote kiosk-1.token (mode 0600)\n", errOut)
	tokenFile := filepath.Join(dir, "kiosk-1.token")
	fi, err := os.Stat(tokenFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	f.runAgent("kiosk-1", tokenFile) // the token in it works

	_, errOut, code = sh(t, f, "cd "+dir+" && aipctl device enroll kiosk-2 --out kiosk-1.token")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "aipctl: --out kiosk-1.token: the file exists; aipctl does not replace a credential: remove it first, or name another file\n", errOut)
	_, err = f.api.Device(t.Context(), "kiosk-2")
	assert.Error(t, err, "kiosk-2 was not enrolled: its token would have been lost")

	_, errOut, code = sh(t, f, "cd "+dir+" && aipctl operator add ci --role viewer --out ci.token && aipctl --token-file ci.token devices -o json")
	require.Equal(t, exitOK, code, errOut)
	fi, err = os.Stat(filepath.Join(dir, "ci.token"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}
