package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// aipctlAs runs the aipctl binary against srv with token, and returns its
// stdout, stderr and exit code.
func aipctlAs(t *testing.T, bin string, srv *serverProcess, token string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "AIP_SERVER=http://"+srv.addr, "AIP_TOKEN="+token)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), errOut.String(), exit.ExitCode()
	}
	require.NoError(t, err)
	return out.String(), errOut.String(), 0
}

// TestAScopedIdentityLivesInTheStoreAcrossRestarts runs the aip-server
// and aipctl binaries: an admin adds a scoped operator with aipctl, which
// works on its site alone; the server is killed and started again, and
// the identity and its dashboard login are still there; revoked, it stays
// revoked across the next restart.
func TestAScopedIdentityLivesInTheStoreAcrossRestarts(t *testing.T) {
	server, ctl := testenv.Command(t, "aip-server"), testenv.Command(t, "aipctl")
	data := t.TempDir()
	srv := startServerProcess(t, server, "127.0.0.1:0", data)
	ctx := context.Background()
	for id, site := range map[string]string{"kiosk-1": "lobby", "cafe-1": "cafe"} {
		resp, err := srv.api.Enroll(ctx, api.EnrollRequest{ID: id, Labels: map[string]string{"site": site}})
		require.NoError(t, err)
		tokenFile := filepath.Join(t.TempDir(), id+".token")
		require.NoError(t, os.WriteFile(tokenFile, []byte(resp.Token), 0o600))
		runAgent(t, agent.Config{ID: id, ServerURL: srv.wsURL(), TokenFile: tokenFile,
			ToolDirs: []string{"fixtures=" + testenv.TestdataTools()}, DataDir: t.TempDir(), CompileCacheDir: sharedCompileCache(t),
			HeartbeatInterval: 100 * time.Millisecond, Logger: testLogger()})
		require.Eventually(t, func() bool { return srv.online(t, id) }, 20*time.Second, 20*time.Millisecond)
	}

	out, errOut, code := aipctlAs(t, ctl, srv, srv.api.Token, "operator", "add", "ci", "--role", "operator", "--devices", "site=lobby")
	require.Equal(t, 0, code, errOut)
	ci := strings.TrimSpace(out)
	_, errOut, code = aipctlAs(t, ctl, srv, ci, "exec", "kiosk-1", "echo", "a=1")
	require.Equal(t, 0, code, errOut)
	_, errOut, code = aipctlAs(t, ctl, srv, ci, "exec", "cafe-1", "echo")
	assert.Equal(t, 2, code)
	assert.Equal(t, "aipctl: device cafe-1 is not enrolled\n", errOut, "outside the scope, as if it did not exist")
	login := dashboardLogin(t, srv, ci)

	// A restart keeps the identity and its login: both are in the store.
	srv.kill(t)
	srv = startServerProcess(t, server, srv.addr, data)
	out, errOut, code = aipctlAs(t, ctl, srv, ci, "devices")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "cafe-1")
	assert.Equal(t, http.StatusOK, login(srv), "the dashboard login outlived the restart")
	out, _, code = aipctlAs(t, ctl, srv, srv.api.Token, "audit", "--identity", "ci")
	require.Equal(t, 0, code)
	assert.Regexp(t, `(?m)\sci\s+[0-9a-f]{16}\s+operator\s+kiosk-1\s+echo\s+success`, out)

	// Revoked, it stays so, the login with it.
	_, errOut, code = aipctlAs(t, ctl, srv, srv.api.Token, "operator", "revoke", "ci")
	require.Equal(t, 0, code, errOut)
	srv.kill(t)
	srv = startServerProcess(t, server, srv.addr, data)
	_, errOut, code = aipctlAs(t, ctl, srv, ci, "devices")
	assert.Equal(t, 3, code)
	assert.Contains(t, errOut, "server answered 401")
	assert.Equal(t, http.StatusUnauthorized, login(srv))
}

// dashboardLogin logs in as the dashboard does, and returns a function
// that reads the devices with the login's cookie from a server, giving
// the status.
func dashboardLogin(t *testing.T, srv *serverProcess, token string) func(*serverProcess) int {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+srv.addr+"/api/login", strings.NewReader(`{"token":"`+token+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, resp.Cookies(), 1)
	cookie := resp.Cookies()[0]
	return func(srv *serverProcess) int {
		req, _ := http.NewRequest("GET", "http://"+srv.addr+"/api/devices", nil)
		req.AddCookie(cookie)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
}
