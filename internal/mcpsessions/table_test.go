package mcpsessions

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// post sends one 2025-11-25 message to url, in session (if any), and
// returns the answer's status and session id.
func post(t *testing.T, url, session, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if session != "" {
		req.Header.Set(server.HeaderKeySessionID, session)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get(server.HeaderKeySessionID)
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// The session evicted is the one idle longest: a request on a session
// keeps it, and the one left alone goes, from the table and from mcp-go.
func TestTheOldestIdleSessionIsEvicted(t *testing.T) {
	table := New(Config{MaxTotal: 2})
	hooks := &server.Hooks{}
	var dropped sync.Map // by mcp-go
	hooks.AddOnUnregisterSession(func(_ context.Context, s server.ClientSession) { dropped.Store(s.SessionID(), true) })
	mcp := server.NewMCPServer("t", "1", server.WithHooks(hooks))
	ts := httptest.NewServer(table.Guard("app", hooks, server.NewStreamableHTTPServer(mcp)))
	defer ts.Close()

	_, first := post(t, ts.URL, "", initialize)
	_, second := post(t, ts.URL, "", initialize)
	status, _ := post(t, ts.URL, first, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	require.Equal(t, http.StatusOK, status)
	status, third := post(t, ts.URL, "", initialize)
	require.Equal(t, http.StatusOK, status)

	_, ok := dropped.Load(second)
	assert.True(t, ok, "mcp-go dropped the evicted session")
	table.mu.Lock()
	defer table.mu.Unlock()
	assert.Contains(t, table.sessions, sessionKey{"app", first}, "used since")
	assert.NotContains(t, table.sessions, sessionKey{"app", second}, "idle longest")
	assert.Contains(t, table.sessions, sessionKey{"app", third})
	assert.Equal(t, 2, table.total)
}

// An owner bounded to one session, initializing again and again, holds
// one: evicting its last session does not lose count of it.
func TestAnOwnerBoundToOneSessionHoldsOne(t *testing.T) {
	table := New(Config{MaxPerOwner: 1})
	hooks := &server.Hooks{}
	ts := httptest.NewServer(table.Guard("app", hooks, server.NewStreamableHTTPServer(server.NewMCPServer("t", "1", server.WithHooks(hooks)))))
	defer ts.Close()
	for range 5 {
		status, _ := post(t, ts.URL, "", initialize)
		require.Equal(t, http.StatusOK, status)
	}
	table.mu.Lock()
	defer table.mu.Unlock()
	assert.Equal(t, 1, table.total)
	assert.Len(t, table.owners, 1)
}

// A request on a session that was DELETEd, evicted, or never issued is
// 404, on which a client initializes again; one that names no session
// where it needs one is 400, as the Streamable HTTP transport says. An
// initialize, and a request of 2026-07-28 (which has no sessions), need
// none.
func TestASessionNotHeldIs404AndNoSessionIs400(t *testing.T) {
	table := New(Config{MaxTotal: 1})
	hooks := &server.Hooks{}
	ts := httptest.NewServer(table.Guard("app", hooks, server.NewStreamableHTTPServer(server.NewMCPServer("t", "1", server.WithHooks(hooks)))))
	defer ts.Close()
	const ping = `{"jsonrpc":"2.0","id":2,"method":"ping"}`

	_, deleted := post(t, ts.URL, "", initialize)
	status, _ := post(t, ts.URL, deleted, ping)
	require.Equal(t, http.StatusOK, status)
	req, err := http.NewRequest(http.MethodDelete, ts.URL, nil)
	require.NoError(t, err)
	req.Header.Set(server.HeaderKeySessionID, deleted)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	status, _ = post(t, ts.URL, deleted, ping)
	assert.Equal(t, http.StatusNotFound, status, "DELETEd")

	_, evicted := post(t, ts.URL, "", initialize)
	_, held := post(t, ts.URL, "", initialize)
	status, _ = post(t, ts.URL, evicted, ping)
	assert.Equal(t, http.StatusNotFound, status, "evicted")
	status, _ = post(t, ts.URL, held, ping)
	assert.Equal(t, http.StatusOK, status)

	status, _ = post(t, ts.URL, "mcp-session-5e0c4a43-8b5c-4f7e-9a43-3f1f0e0c2a10", ping)
	assert.Equal(t, http.StatusNotFound, status, "never issued")
	status, _ = post(t, ts.URL, "", ping)
	assert.Equal(t, http.StatusBadRequest, status, "no session")
	get, err := http.NewRequest(http.MethodGet, ts.URL, nil)
	require.NoError(t, err)
	get.Header.Set("Accept", "text/event-stream")
	resp, err = http.DefaultClient.Do(get)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "a stream for no session")
}
