package server

import (
	"bufio"
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// revocationDeadline is the issue's: a revocation takes effect within a
// second on every open surface.
const revocationDeadline = time.Second

// openStream opens the event stream of task as token and returns a
// channel closed when the server ends it.
func (ts *testServer) openStream(token, task string) <-chan struct{} {
	ts.t.Helper()
	req, err := http.NewRequest("GET", ts.http.URL+"/api/tasks/"+task+"/events", nil)
	require.NoError(ts.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(ts.t, err)
	require.Equal(ts.t, http.StatusOK, resp.StatusCode)
	return untilEOF(resp)
}

// untilEOF returns a channel closed when resp's body ends.
func untilEOF(resp *http.Response) <-chan struct{} {
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer resp.Body.Close()
		for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		}
	}()
	return ended
}

// linkClosed returns a channel closed when the server closes rc's link.
func linkClosed(rc *rawClient) <-chan struct{} {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for {
			if _, err := rc.read(); err != nil {
				return
			}
		}
	}()
	return closed
}

// requireWithin requires ch to close within revocationDeadline.
func requireWithin(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(revocationDeadline):
		t.Fatalf("%s stayed open more than %s after the revocation", what, revocationDeadline)
	}
}

// requireOpen requires ch to stay open a moment: what a revocation does
// not cover goes on.
func requireOpen(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s closed, though the revocation did not cover it", what)
	case <-time.After(100 * time.Millisecond):
	}
}

// surfaces are what one token of an identity has open: an event stream,
// a constellation link, a dashboard login, and on /mcp a session's stream
// of notifications and a call waiting for its device.
type surfaces struct {
	stream, link      <-chan struct{}
	mcpStream, mcpRun <-chan struct{}
	login             *browser
}

func (ts *testServer) openSurfaces(token, clientID, task string) surfaces {
	ts.t.Helper()
	con, _ := ts.constellationAs(token, clientID, "quiet-1")
	b := &browser{t: ts.t, client: http.DefaultClient, base: ts.http.URL}
	require.Equal(ts.t, http.StatusOK, b.login(token).StatusCode)
	open := surfaces{stream: ts.openStream(token, task), link: linkClosed(con), login: b}
	open.mcpStream, open.mcpRun = ts.openMCP(token)
	return open
}

// each checks every surface of open but the login, which has no
// connection to close.
func (open surfaces) each(t *testing.T, whose string, check func(*testing.T, <-chan struct{}, string)) {
	t.Helper()
	check(t, open.stream, whose+" event stream")
	check(t, open.link, whose+" constellation link")
	check(t, open.mcpStream, whose+" MCP notification stream")
	check(t, open.mcpRun, whose+" MCP call")
}

// quietTask is a task that runs until cancelled, on the device quiet-1.
func quietTask(ts *testServer) string {
	ts.t.Helper()
	if ts.srv.reg.Device("quiet-1") == nil {
		ts.device("quiet-1", tool("stock", "echo", protocol.ToolAction)).drain()
	}
	return dispatchPlan(ts.t, ts, "quiet-1", "steps: [{tool: echo, timeout: 1h}]").SessionID
}

func TestRevokingAnIdentityClosesEveryOpenSurfaceWithinASecond(t *testing.T) {
	var heard []Revocation
	var mu sync.Mutex
	ts := newTestServer(t, func(c *Config) {
		c.OnRevoke = func(v Revocation) { mu.Lock(); heard = append(heard, v); mu.Unlock() }
	})
	ctx := context.Background()
	task := quietTask(ts)
	ann := ts.addIdentity("ann", api.RoleOperator, nil)
	bob := ts.addIdentity("bob", api.RoleOperator, nil)
	annOpen := ts.openSurfaces(ann, "orch-ann", task)
	bobOpen := ts.openSurfaces(bob, "orch-bob", task)

	require.NoError(t, ts.api.RevokeIdentity(ctx, "ann"))
	annOpen.each(t, "ann's", requireWithin)
	assert.Equal(t, http.StatusUnauthorized, annOpen.login.do("GET", "/api/devices", "").StatusCode, "ann's dashboard login")
	_, err := ts.as(ann).Devices(ctx)
	requireStatus(t, err, http.StatusUnauthorized, `this token of identity "ann" was revoked at `)
	_, err = ts.dial(ann)
	assert.Error(t, err, "nor can ann's token connect again")

	bobOpen.each(t, "bob's", requireOpen)
	assert.Equal(t, http.StatusOK, bobOpen.login.do("GET", "/api/devices", "").StatusCode)
	mu.Lock()
	assert.Equal(t, []Revocation{{Identity: "ann"}}, heard, "the hook a cluster broadcasts with")
	mu.Unlock()
}

func TestRevokingOneTokenClosesWhatItOpenedAlone(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	task := quietTask(ts)
	first := ts.addIdentity("ci", api.RoleOperator, nil)
	second, err := ts.api.RotateIdentity(ctx, "ci", time.Hour)
	require.NoError(t, err)
	firstOpen := ts.openSurfaces(first, "orch-1", task)
	secondOpen := ts.openSurfaces(second.Token, "orch-2", task)
	me, err := ts.as(first).WhoAmI(ctx)
	require.NoError(t, err)

	require.NoError(t, ts.api.RevokeToken(ctx, "ci", me.TokenID))
	firstOpen.each(t, "the revoked token's", requireWithin)
	assert.Equal(t, http.StatusUnauthorized, firstOpen.login.do("GET", "/api/devices", "").StatusCode)
	secondOpen.each(t, "the other token's", requireOpen)
	assert.Equal(t, http.StatusOK, secondOpen.login.do("GET", "/api/devices", "").StatusCode)
}

func TestARotationsGraceEndsWhatTheOldTokenHasOpen(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	task := quietTask(ts)
	old := ts.addIdentity("ci", api.RoleOperator, nil)
	oldOpen := ts.openSurfaces(old, "orch-1", task)
	rotated, err := ts.api.RotateIdentity(ctx, "ci", 500*time.Millisecond)
	require.NoError(t, err)
	requireOpen(t, oldOpen.link, "the old token's link, within the grace")
	newOpen := ts.openSurfaces(rotated.Token, "orch-2", task)
	oldOpen.each(t, "the old token's, once the grace ends,", requireWithin)
	assert.Equal(t, http.StatusUnauthorized, oldOpen.login.do("GET", "/api/devices", "").StatusCode)
	newOpen.each(t, "the new token's", requireOpen)
}

func TestARevocationFromAnotherNodeClosesWhatItCoversHere(t *testing.T) {
	ts := newTestServer(t)
	task := quietTask(ts)
	ann := ts.addIdentity("ann", api.RoleOperator, nil)
	open := ts.openSurfaces(ann, "orch-ann", task)
	// The store (shared in a cluster) still has ann: only the open
	// surfaces here hear of it.
	ts.srv.Revoked(Revocation{Identity: "ann"})
	open.each(t, "the", requireWithin)
}

func TestAConstellationRevokedBeforeItRegistersIsClosed(t *testing.T) {
	ts := newTestServer(t)
	ts.device("kiosk-1").serveOK()
	ann := ts.addIdentity("ann", api.RoleViewer, nil)
	rc := ts.mustDial(ann) // upgraded, not yet registered
	require.NoError(t, ts.api.RevokeIdentity(context.Background(), "ann"))
	rc.id = "orch-ann"
	rc.send(protocol.ClientMessage{Type: protocol.ClientRegister, ClientType: protocol.ClientConstellation, ClientID: "orch-ann", TargetID: "kiosk-1"})
	requireWithin(t, linkClosed(rc), "a link whose identity was revoked while it registered")
}

// TestATokenRevokedInTheStoreWorksHereUntilTheRevocationComes pins down
// that Server.Revoked is what makes a revocation act on a node: a token
// deleted from a shared store by another node is refused here once its
// revocation is carried here, and is not read from the store per request
// until then (within the cache's time).
func TestATokenRevokedInTheStoreWorksHereUntilTheRevocationComes(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	ann := ts.addIdentity("ann", api.RoleViewer, nil)
	_, err := ts.as(ann).WhoAmI(ctx)
	require.NoError(t, err)

	err = ts.srv.store.Write(ctx, func(tx *store.Tx) error { _, err := tx.Identities().Delete("ann"); return err })
	require.NoError(t, err)
	_, err = ts.as(ann).WhoAmI(ctx)
	require.NoError(t, err, "another node's revocation has not come yet")

	ts.srv.Revoked(Revocation{Identity: "ann"})
	_, err = ts.as(ann).WhoAmI(ctx)
	requireStatus(t, err, http.StatusUnauthorized, `this token of identity "ann" was revoked at `)
}
