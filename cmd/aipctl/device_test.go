package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
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

// Item 7 of issue 43: a revoked credential is told that it was revoked,
// and when: a device's token at the WebSocket, whose agent logs it so,
// and an identity's token at the API. A token never issued is told no
// more than before.
func TestARevokedCredentialIsToldItWasRevokedAndWhen(t *testing.T) {
	f := newFleet(t, nil)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "kiosk-1.token")
	_, errOut, code := sh(t, f, "aipctl device enroll kiosk-1 --out "+tokenFile)
	require.Equal(t, exitOK, code, errOut)
	refused := make(chan string, 16)
	logs := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		if bytes.Contains(p, []byte("was revoked at")) {
			select {
			case refused <- string(p):
			default:
			}
		}
		return len(p), nil
	}), nil))
	f.runAgent("kiosk-1", tokenFile, func(c *agent.Config) { c.Logger = logs })

	_, errOut, code = sh(t, f, "aipctl device revoke kiosk-1")
	require.Equal(t, exitOK, code, errOut)
	var line string
	select {
	case line = <-refused:
	case <-time.After(time.Minute): // a bound, should the agent never say it
		t.Fatal("the agent never logged that its device was revoked")
	}
	assert.Regexp(t, `server refused the device \(401 this token of device \\"kiosk-1\\" was revoked at 20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ\): `+
		`this device was revoked; it links again only once enrolled again \(aipctl device enroll\)`, line)

	token, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	status, body := upgrade(t, f, strings.TrimSpace(string(token)))
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Regexp(t, `^this token of device "kiosk-1" was revoked at \S+Z\n$`, body)
	status, body = upgrade(t, f, "aipd_never-issued")
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, "unauthorized\n", body, "a token never issued learns nothing")

	_, errOut, code = sh(t, f, "cd "+dir+" && aipctl operator add ci --role viewer --out ci.token && aipctl operator revoke ci")
	require.Equal(t, exitOK, code, errOut)
	_, errOut, code = sh(t, f, "cd "+dir+" && aipctl --token-file ci.token devices")
	assert.Equal(t, exitUnreachable, code)
	assert.Regexp(t, `^aipctl: server answered 401: this token of identity "ci" was revoked at 20\S+Z\n$`, errOut)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "never.token"), []byte("aipo_never-issued"), 0o600))
	_, errOut, code = sh(t, f, "cd "+dir+" && aipctl --token-file never.token devices")
	assert.Equal(t, exitUnreachable, code)
	assert.Equal(t, "aipctl: server answered 401: wrong operator token\n", errOut, "as before")
}

// upgrade asks f's server for a device link with token, and returns the
// status and body of its refusal.
func upgrade(t *testing.T, f *fleet, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.api.BaseURL+"/ws", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
