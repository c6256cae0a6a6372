package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mcpInitialize opens an MCP session as token (2025-11-25's initialize),
// and waits until the gateway holds it, held counting every identity's:
// it returns the session's id, or the refusal's status and Retry-After.
func (ts *testServer) mcpInitialize(token string, held float64) (session string, status int, retryAfter string) {
	ts.t.Helper()
	resp, err := ts.mcpPost(context.Background(), token, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}}})
	require.NoError(ts.t, err)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		// mcp-go holds the session once it has answered.
		require.Eventually(ts.t, func() bool { return metric(ts.t, ts.scrape(), "edgeaip_mcp_sessions") == held },
			10*time.Second, 5*time.Millisecond, "the gateway holds %v sessions", held)
	}
	return resp.Header.Get("Mcp-Session-Id"), resp.StatusCode, resp.Header.Get("Retry-After")
}

// mcpListen opens session's stream of notifications as token, which
// makes the session busy until the test ends.
func (ts *testServer) mcpListen(token, session string) {
	ts.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ts.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", ts.http.URL+"/mcp", nil)
	require.NoError(ts.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", session)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(ts.t, err)
	require.Equal(ts.t, http.StatusOK, resp.StatusCode)
	untilEOF(resp)
}

// mcpRefused asserts that a new session of token is refused, once, for
// bound, every session under it being busy.
func (ts *testServer) mcpRefused(token, bound string) {
	ts.t.Helper()
	_, status, retry := ts.mcpInitialize(token, -1)
	assert.Equal(ts.t, http.StatusTooManyRequests, status, "every session under the %s bound is busy", bound)
	assert.NotEmpty(ts.t, retry)
	assert.Equal(ts.t, 1.0, metric(ts.t, ts.scrape(), "edgeaip_mcp_sessions_refused_total", "bound", bound))
}

// One identity holds at most MaxSessionsPerIdentity sessions: past it a
// new one takes the place of its oldest idle one, and is refused with 429
// and Retry-After once all of its sessions are busy. Another identity is
// not held back by it.
func TestAnIdentitysMCPSessionsAreBounded(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.MCP.MaxSessionsPerIdentity = 2 })
	token := ts.addIdentity("assistant", api.RoleViewer, nil)
	gauge := func(name, bound string) float64 { return metric(t, ts.scrape(), name, "bound", bound) }

	first, _, _ := ts.mcpInitialize(token, 1)
	second, _, _ := ts.mcpInitialize(token, 2)
	third, status, _ := ts.mcpInitialize(token, 2)
	require.Equal(t, http.StatusOK, status, "the oldest idle session makes room")
	assert.Equal(t, 1.0, gauge("edgeaip_mcp_sessions_evicted_total", "identity"))
	assert.NotEqual(t, first, third)

	ts.mcpListen(token, second)
	ts.mcpListen(token, third)
	ts.mcpRefused(token, "identity")

	_, status, _ = ts.mcpInitialize(ts.addIdentity("other", api.RoleViewer, nil), 3)
	assert.Equal(t, http.StatusOK, status, "another identity has a bound of its own")
}

// The node holds at most MaxSessions sessions of all identities: past
// it a new one takes the place of the oldest idle one, whoever's, and is
// refused with 429 once all are busy.
func TestTheNodesMCPSessionsAreBounded(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.MCP.MaxSessionsPerIdentity, c.MCP.MaxSessions = 2, 3 })
	ann, bob, cat := ts.addIdentity("ann", api.RoleViewer, nil), ts.addIdentity("bob", api.RoleViewer, nil), ts.addIdentity("cat", api.RoleViewer, nil)
	gauge := func(name, bound string) float64 { return metric(t, ts.scrape(), name, "bound", bound) }

	ts.mcpInitialize(ann, 1)
	annsSecond, _, _ := ts.mcpInitialize(ann, 2)
	bobsFirst, _, _ := ts.mcpInitialize(bob, 3)
	bobsSecond, status, _ := ts.mcpInitialize(bob, 3)
	require.Equal(t, http.StatusOK, status, "ann's oldest idle session makes room")
	assert.Equal(t, 1.0, gauge("edgeaip_mcp_sessions_evicted_total", "node"))
	assert.Zero(t, gauge("edgeaip_mcp_sessions_evicted_total", "identity"))

	for token, session := range map[string]string{ann: annsSecond, bob: bobsFirst} {
		ts.mcpListen(token, session)
	}
	ts.mcpListen(bob, bobsSecond)
	ts.mcpRefused(cat, "node")
}
