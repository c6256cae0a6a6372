package agent

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/internal/version"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The agent reports its build's version, with its OS and architecture,
// at registration, and names itself and its version in its link's
// User-Agent, which a server that refuses its wire quotes back.
func TestTheAgentReportsItsVersionOSAndArchAtRegistration(t *testing.T) {
	p := newTestPeer(t)
	startAgent(t, agentConfig(t, p.url()))
	l := p.next(t)

	info, ok := l.register.Metadata[protocol.MetadataSystemInfo].(map[string]any)
	require.True(t, ok, "metadata has system_info: %v", l.register.Metadata)
	assert.Equal(t, version.Version(), info["agent_version"])
	assert.Equal(t, runtime.GOOS, info["platform"])
	assert.Equal(t, runtime.GOARCH, info["arch"])
	assert.Equal(t, "aip-agent/"+version.Version(), l.upgrade.Header.Get("User-Agent"))
}

// A server that speaks another version of the wire refuses the agent with
// 426 and why; the agent logs the reason and keeps trying, so that the
// server's upgrade lets it in with no one at the device.
func TestAServersRefusalOfTheAgentsWireIsLoggedWithItsReason(t *testing.T) {
	reason := (&protocol.WireMismatch{Offered: []string{protocol.Subprotocol}}).Explain("aip-agent/"+version.Version(), "aip-server 0.9.0")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, reason, http.StatusUpgradeRequired)
	}))
	t.Cleanup(srv.Close)
	a := startAgent(t, agentConfig(t, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws"))
	require.Eventually(t, func() bool {
		return a.logs.Contains("server refused this agent's version of the wire (426): " + reason)
	}, testenv.Slowdown*10*time.Second, 10*time.Millisecond, "%s", a.logs.String())
	assert.Contains(t, a.logs.String(), "link down; reconnecting")
}
