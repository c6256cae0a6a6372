package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readToken is the token in a token file.
func readToken(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// requireRefused requires the server at url to refuse a device's
// connection with token, before the upgrade.
func requireRefused(t *testing.T, url, token string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, resp, err := protocol.Dial(ctx, url, protocol.DialOptions{Header: http.Header{"Authorization": {"Bearer " + token}}, Encoding: protocol.CBOR})
	if conn != nil {
		conn.CloseNow()
	}
	require.Error(t, err, "the token was taken")
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// rotate rotates id's token and requires the answer to be in state.
func (c *cluster) rotate(id, state string) {
	c.t.Helper()
	r, err := c.api.RotateToken(context.Background(), id, api.RotateRequest{})
	require.NoError(c.t, err)
	require.Equal(c.t, state, r.State, "%+v", r)
}

// echoes requires id to run a tool.
func (c *cluster) echoes(id string) {
	c.t.Helper()
	resp := c.exec(id, "echo", map[string]any{"n": 1}, 10*time.Second)
	require.True(c.t, resp.Succeeded(), "%+v", resp.Results)
}

// An online agent gets its new token over its link and writes it to its
// token file; the old token is refused once it confirmed, the link goes
// on, and the agent connects with the new token from then on.
func TestAnOnlineAgentsTokenIsRotated(t *testing.T) {
	c := newCluster(t)
	tokenFile := c.enroll("kiosk-1")
	old := readToken(t, tokenFile)
	ra := c.startAgent("kiosk-1", tokenFile)

	c.rotate("kiosk-1", api.RotationConfirmed)
	fresh := readToken(t, tokenFile)
	require.NotEqual(t, old, fresh)
	requireRefused(t, c.wsURL(), old)
	c.echoes("kiosk-1") // on the link that carried the rotation

	ra.stop()
	c.waitOnline("kiosk-1", false)
	c.startAgent("kiosk-1", tokenFile)
	c.echoes("kiosk-1")
}

// An agent offline during the rotation keeps its old token until it next
// connects; then it is rotated, and the old token is refused.
func TestAnOfflineAgentsTokenIsRotatedWhenItNextConnects(t *testing.T) {
	c := newCluster(t)
	tokenFile := c.enroll("kiosk-1")
	old := readToken(t, tokenFile)
	c.startAgent("kiosk-1", tokenFile).stop()
	c.waitOnline("kiosk-1", false)

	c.rotate("kiosk-1", api.RotationPending)
	assert.Equal(t, old, readToken(t, tokenFile))
	c.startAgent("kiosk-1", tokenFile) // with the old token
	require.Eventually(t, func() bool { return c.device("kiosk-1").TokenRotation == nil }, 20*time.Second, 20*time.Millisecond,
		"the rotation was never confirmed")
	assert.NotEqual(t, old, readToken(t, tokenFile))
	requireRefused(t, c.wsURL(), old)
	c.echoes("kiosk-1")
}

// A token file the agent may not write is left alone: the new token goes
// into the data dir, and the agent process, killed and started again,
// finds it there and connects with it.
func TestARotatedTokenGoesToTheDataDirWhenTheTokenFileIsReadOnly(t *testing.T) {
	c := newCluster(t)
	tokenFile := c.enroll("kiosk-1")
	old := readToken(t, tokenFile)
	testenv.MakeReadOnly(t, tokenFile)
	data := t.TempDir()
	p := newAgentProcess(t, agentYAML(t, "kiosk-1", c.wsURL(), tokenFile, data, t.TempDir()))
	p.start()
	c.waitOnline("kiosk-1", true)

	c.rotate("kiosk-1", api.RotationConfirmed)
	assert.Equal(t, old, readToken(t, tokenFile), "the read-only token file is untouched")
	assert.FileExists(t, filepath.Join(data, "rotated-token.json"))
	assert.True(t, p.logged("the token file cannot be written; the new token goes into the data dir"))
	requireRefused(t, c.wsURL(), old)

	p.kill()
	c.waitOnline("kiosk-1", false)
	p.start()
	p.waitLogged("using the token a rotation left in the data dir")
	c.waitOnline("kiosk-1", true)
	c.echoes("kiosk-1")
}
