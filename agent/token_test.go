package agent

import (
	"net"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// UFO's server reads a device's token only from ?token=, ours from the
// Authorization header: on the JSON wire, which is for UFO's server, the
// agent sends both; on CBOR the header alone.
func TestTheJSONWireCarriesTheTokenInTheURLToo(t *testing.T) {
	for _, wire := range []protocol.Encoding{protocol.CBOR, protocol.JSON} {
		t.Run(wire.String(), func(t *testing.T) {
			up := linkedOn(t, wire).upgrade

			assert.Equal(t, "Bearer aipd_test", up.Header.Get("Authorization"))
			assert.Equal(t, "/ws", up.URL.Path)
			if wire == protocol.JSON {
				assert.Equal(t, "aipd_test", up.URL.Query().Get("token"))
			} else {
				assert.Empty(t, up.URL.RawQuery, "the token is not put in the URL for our server")
			}
		})
	}
}

// The agent logs the server's URL, and dial errors that quote it, but
// never a token in it: not the one it adds on the JSON wire, nor one the
// operator wrote into the URL.
func TestNoTokenInAURLIsLogged(t *testing.T) {
	t.Run("dial errors on the JSON wire", func(t *testing.T) {
		cfg := agentConfig(t, "ws://"+closedAddr(t)+"/ws")
		cfg.Wire = protocol.JSON
		a := startAgent(t, cfg)
		require.Eventually(t, func() bool { return a.logs.Contains("link down") }, testenv.Slowdown*10*time.Second, 10*time.Millisecond)
		a.stop()
		logs := a.logs.String()
		assert.Contains(t, logs, "token=REDACTED", "the dial error names the URL, redacted")
		assert.NotContains(t, logs, "aipd_test")
	})
	t.Run("a token written into the URL", func(t *testing.T) {
		p := newTestPeer(t)
		a := startAgent(t, agentConfig(t, p.url()+"?token=aipd_written_into_the_url"))
		l := p.next(t)
		assert.Equal(t, "aipd_written_into_the_url", l.upgrade.URL.Query().Get("token"), "the URL is dialled as given")
		require.Eventually(t, func() bool { return a.logs.Contains(`msg=registered`) }, testenv.Slowdown*10*time.Second, 10*time.Millisecond)
		a.stop()
		logs := a.logs.String()
		assert.Contains(t, logs, "token=REDACTED")
		assert.NotContains(t, logs, "aipd_written_into_the_url")
	})
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
