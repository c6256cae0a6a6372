package server

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/internal/version"
	"github.com/edgeaip/edgeaip/protocol"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dialOffering dials /ws with token, offering protocols as the client's
// subprotocols and userAgent as its User-Agent, and returns the refused
// upgrade's status and body; it fails the test if the upgrade succeeds.
func (ts *testServer) dialOffering(token, userAgent string, protocols ...string) (int, string) {
	ts.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := http.Header{"Authorization": {"Bearer " + token}, "User-Agent": {userAgent}}
	ws, resp, err := websocket.Dial(ctx, ts.wsURL(), &websocket.DialOptions{HTTPHeader: h, Subprotocols: protocols})
	if err == nil {
		ws.CloseNow()
		ts.t.Fatalf("the upgrade offering %v was accepted", protocols)
	}
	require.NotNil(ts.t, resp, "%v", err)
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// The server accepts any agent that speaks its wire's version, and
// refuses one that offers only another, naming both sides' versions and
// what to do; the agent does not come online.
func TestAnAgentSpeakingAnotherWireVersionIsRefusedNamingBothVersions(t *testing.T) {
	ts := newTestServer(t)
	token := ts.enroll("kiosk-1")
	server := "aip-server " + version.Version()

	code, body := ts.dialOffering(token, "aip-agent/9.0.0", "aip.cbor.v2")
	assert.Equal(t, http.StatusUpgradeRequired, code)
	assert.Contains(t, body, "aip-agent/9.0.0 speaks aip.cbor.v2, newer than "+server+", which speaks aip.cbor.v1: "+
		"upgrade the server, or run an agent release that speaks aip.cbor.v1")

	code, body = ts.dialOffering(token, "aip-agent/0.1.0", "aip.cbor.v0")
	assert.Equal(t, http.StatusUpgradeRequired, code)
	assert.Contains(t, body, "aip-agent/0.1.0 speaks aip.cbor.v0, older than "+server+", which speaks aip.cbor.v1: "+
		"update the agent to a release that speaks aip.cbor.v1")
	assert.Contains(t, ts.logs.String(), `msg="link refused: another version of the wire" device=kiosk-1`)

	devs, err := ts.api.Devices(context.Background())
	require.NoError(t, err)
	require.Len(t, devs, 1)
	assert.False(t, devs[0].Online)

	// An agent of any release that speaks the wire links.
	ts.mustDial(token).register("kiosk-1")
}

// The server's version is told to a client that authenticated, and to
// no one else: a wrong token learns only that it is wrong.
func TestAWireRefusalIsToldOnlyToAClientThatAuthenticated(t *testing.T) {
	ts := newTestServer(t)
	ts.enroll("kiosk-1")
	code, body := ts.dialOffering("aipd_wrong", "aip-agent/9.0.0", "aip.cbor.v2")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.NotContains(t, body, "aip.cbor")
	assert.NotContains(t, body, version.Version())
}

func TestTheVersionEndpointAnswersTheServersBuildAndWire(t *testing.T) {
	ts := newTestServer(t)
	v, err := ts.api.Version(context.Background())
	require.NoError(t, err)
	b := version.Get()
	assert.Equal(t, b.Version, v.Version)
	assert.Equal(t, b.Commit, v.Commit)
	assert.Equal(t, b.Go, v.Go)
	assert.Equal(t, b.OS+"/"+b.Arch, v.OS+"/"+v.Arch)
	assert.Equal(t, protocol.Subprotocol, v.Wire)

	// The open health check tells none of it.
	code, body := ts.apiStatusAnonymous("/api/health")
	assert.Equal(t, http.StatusOK, code)
	assert.NotContains(t, body, `"version"`)
	code, _ = ts.apiStatusAnonymous("/api/version")
	assert.Equal(t, http.StatusUnauthorized, code)
}

// apiStatusAnonymous GETs path with no token: its status and body.
func (ts *testServer) apiStatusAnonymous(path string) (int, string) {
	ts.t.Helper()
	resp, err := http.Get(ts.http.URL + path)
	require.NoError(ts.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(ts.t, err)
	return resp.StatusCode, string(body)
}

// The MCP gateway tells its clients the server's version, as
// aip-server --version does.
func TestTheMCPGatewayNamesTheServersVersion(t *testing.T) {
	ts := newTestServer(t)
	cl, err := mcpclient.NewStreamableHttpClient(ts.http.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + ts.api.Token}))
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	require.NoError(t, cl.Start(context.Background()))
	res, err := cl.Initialize(context.Background(), mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "test"}}})
	require.NoError(t, err)
	assert.Equal(t, mcp.Implementation{Name: "aip-server", Version: version.Version()}, res.ServerInfo)
}
