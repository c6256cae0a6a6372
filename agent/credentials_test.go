package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/internal/testpki"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rotateTo sends the agent a new token and returns its answer.
func (l *peerLink) rotateTo(t *testing.T, token string) protocol.ClientMessage {
	t.Helper()
	l.send(t, &protocol.ServerMessage{Type: protocol.ServerRotateToken, Status: protocol.StatusOK, ResponseID: "rot-1", Token: token})
	m := l.next(t)
	require.Equal(t, protocol.ClientTokenRotated, m.Type, "%+v", m)
	require.Equal(t, "rot-1", m.PrevResponseID)
	return m
}

// The agent keeps a token the server rotates it to, says so, and connects
// with it from then on.
func TestTheAgentKeepsARotatedTokenAndConnectsWithIt(t *testing.T) {
	p := newTestPeer(t)
	cfg := agentConfig(t, p.url())
	a := startAgent(t, cfg)
	l := p.next(t)

	m := l.rotateTo(t, "aipd_rotated")
	assert.Equal(t, protocol.StatusOK, m.Status)
	b, err := os.ReadFile(cfg.TokenFile)
	require.NoError(t, err)
	assert.Equal(t, "aipd_rotated\n", string(b))
	assert.True(t, a.logs.Contains("device token rotated; the new one is used from the next connection"))
	assert.False(t, a.logs.Contains("aipd_rotated"), "the token is never logged")

	l.conn.CloseNow()
	assert.Equal(t, "Bearer aipd_rotated", p.next(t).upgrade.Header.Get("Authorization"))
}

// A token the agent cannot keep is refused, saying why, and the old one
// kept.
func TestATokenTheAgentCannotKeepLeavesTheOldOne(t *testing.T) {
	p := newTestPeer(t)
	startAgent(t, agentConfig(t, p.url()))
	l := p.next(t)

	m := l.rotateTo(t, "aipd_with space")
	assert.Equal(t, protocol.StatusError, m.Status)
	assert.Contains(t, m.Error, "want visible ASCII")
	l.conn.CloseNow()
	assert.Equal(t, "Bearer aipd_test", p.next(t).upgrade.Header.Get("Authorization"))
}

// tlsPeer is a testPeer serving WSS with a certificate of ca, for
// loopback or as serving describes it, asking for client certificates of
// clientCA when it is not nil.
func tlsPeer(t *testing.T, ca *testpki.CA, clientCA *testpki.CA, serving ...testpki.Leaf) *testPeer {
	t.Helper()
	p := &testPeer{links: make(chan *peerLink, 16)}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	issued := ca.Issue(t, append(serving, testpki.Loopback())[0])
	pair, err := tls.X509KeyPair(issued.CertPEM, issued.KeyPEM)
	require.NoError(t, err)
	p.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	if clientCA != nil {
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.Cert)
		p.srv.TLS.ClientAuth, p.srv.TLS.ClientCAs = tls.VerifyClientCertIfGiven, pool
	}
	p.srv.StartTLS()
	t.Cleanup(p.srv.Close)
	return p
}

// deviceFiles writes a certificate for device id from ca, edited, and its
// key, and returns their paths.
func deviceFiles(t *testing.T, ca *testpki.CA, id string, edit ...func(*testpki.Leaf)) (cert, key string) {
	t.Helper()
	l := testpki.Device(id)
	for _, e := range edit {
		e(&l)
	}
	return ca.Issue(t, l).Write(t, t.TempDir(), id)
}

// The agent verifies a wss:// server against --ca, and presents its
// certificate, which may stand in for the token.
func TestTheAgentDialsTLSWithItsCAAndCertificate(t *testing.T) {
	ca := testpki.NewCA(t, "test CA")
	p := tlsPeer(t, ca, ca)
	caFile, _ := ca.WriteCA(t, t.TempDir(), "ca")
	cfg := agentConfig(t, p.url())
	cfg.TokenFile, cfg.CAFile = "", caFile
	cfg.CertFile, cfg.KeyFile = deviceFiles(t, ca, "dev-1")
	startAgent(t, cfg)

	l := p.next(t)
	assert.Empty(t, l.upgrade.Header.Get("Authorization"), "no token to send")
	require.NotNil(t, l.upgrade.TLS)
	require.Len(t, l.upgrade.TLS.PeerCertificates, 1)
	id, err := protocol.DeviceOfCert(l.upgrade.TLS.PeerCertificates[0])
	require.NoError(t, err)
	assert.Equal(t, "dev-1", id)

	// A token the server sends then goes into the data dir, for want of a
	// token file.
	assert.Equal(t, protocol.StatusOK, l.rotateTo(t, "aipd_rotated").Status)
	assert.FileExists(t, filepath.Join(cfg.DataDir, "rotated-token.json"))
}

// What goes wrong with TLS is logged as what the operator must fix.
func TestTLSFailuresSayWhatToFix(t *testing.T) {
	ca := testpki.NewCA(t, "test CA")
	caFile, _ := ca.WriteCA(t, t.TempDir(), "ca")
	for name, c := range map[string]struct {
		peer  *testPeer
		edit  func(*Config)
		wants []string
	}{
		"a server the agent does not trust": {tlsPeer(t, ca, nil), func(*Config) {}, []string{
			"the server's certificate is not trusted (give the CA that signed it as --ca, server.ca)", "certificate signed by unknown authority"}},
		"a server certificate for another name": {tlsPeer(t, ca, nil, testpki.Leaf{Name: "elsewhere", DNSNames: []string{"elsewhere.example"}, Server: true}),
			func(c *Config) { c.CAFile = caFile }, []string{"the server's certificate is not valid for wss://127.0.0.1:", "cannot validate certificate for 127.0.0.1"}},
		"a certificate of a CA the server does not trust": {tlsPeer(t, ca, testpki.NewCA(t, "the server's client CA")), func(c *Config) {
			c.CAFile = caFile
			c.CertFile, c.KeyFile = deviceFiles(t, ca, "dev-1")
		}, []string{"the server refused the device certificate, though it has not expired: is it signed by a CA the server trusts", "unknown certificate authority"}},
		"an expired certificate": {tlsPeer(t, ca, ca), func(c *Config) {
			c.CAFile = caFile
			c.CertFile, c.KeyFile = deviceFiles(t, ca, "dev-1", func(l *testpki.Leaf) {
				l.NotBefore, l.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
			})
		}, []string{"the server refused the device certificate, which expired at", "expired certificate"}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := agentConfig(t, c.peer.url())
			c.edit(&cfg)
			a := startAgent(t, cfg)
			require.Eventually(t, func() bool { return a.logs.Contains("link down") }, testenv.Slowdown*10*time.Second, 10*time.Millisecond)
			for _, want := range c.wants {
				assert.True(t, a.logs.Contains(want), "the agent did not log %q:\n%s", want, a.logs.String())
			}
		})
	}
}

// A server's 401 is logged with the reason it gave.
func TestARefusalAtTheUpgradeIsLoggedWithTheServersReason(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "device certificate refused: revoked", http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	a := startAgent(t, agentConfig(t, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws"))
	require.Eventually(t, func() bool {
		return a.logs.Contains("server refused the device (401 device certificate refused: revoked)")
	}, testenv.Slowdown*10*time.Second, 10*time.Millisecond, "%s", a.logs.String())
}

// TLS files the agent could not use stop it at start, saying which.
func TestTLSFilesThatCannotWorkStopTheAgent(t *testing.T) {
	ca := testpki.NewCA(t, "test CA")
	other, otherKey := deviceFiles(t, ca, "dev-2")
	plain, plainKey := ca.Issue(t, testpki.Leaf{Name: "plain", Client: true}).Write(t, t.TempDir(), "plain")
	for name, c := range map[string]struct {
		edit func(*Config)
		want string
	}{
		"a certificate of another device": {func(c *Config) {
			c.ServerURL = "wss://127.0.0.1:1/ws"
			c.CertFile, c.KeyFile = other, otherKey
		}, `names device "dev-2", not "dev-1"`},
		"a certificate for a ws:// server": {func(c *Config) { c.CertFile, c.KeyFile = other, otherKey }, "a CA or a device certificate needs a wss:// URL"},
		"a certificate without its key": {func(c *Config) {
			c.ServerURL = "wss://127.0.0.1:1/ws"
			c.CertFile = other
		}, "the device certificate and its key go together"},
		"no token, and a certificate that names no device": {func(c *Config) {
			c.ServerURL, c.TokenFile = "wss://127.0.0.1:1/ws", ""
			c.CertFile, c.KeyFile = plain, plainKey
		}, "names no device (want the DNS name dev-1.devices.edgeaip), and there is no token file"},
		"neither token nor certificate": {func(c *Config) { c.TokenFile = "" }, "a token file or a device certificate is required"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := agentConfig(t, "ws://127.0.0.1:1/ws")
			c.edit(&cfg)
			_, err := New(context.Background(), cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}
