package agent

import (
	"runtime"
	"testing"

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
