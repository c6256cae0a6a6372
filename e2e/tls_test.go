package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/internal/testpki"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tlsFleet is an aip-server process serving HTTPS and WSS with
// certificates of CAs the test made: serverCA signs its certificate,
// fleetCA the devices' certificates it takes (--client-ca), and deviceCA
// is the CA it signs devices' requests with.
type tlsFleet struct {
	t                           *testing.T
	srv                         *serverProcess
	dir                         string
	serverCA, fleetCA, deviceCA *testpki.CA
	caFile, certFile, keyFile   string
}

func newTLSFleet(t *testing.T) *tlsFleet {
	t.Helper()
	f := &tlsFleet{t: t, dir: t.TempDir(), serverCA: testpki.NewCA(t, "server CA"),
		fleetCA: testpki.NewCA(t, "fleet CA"), deviceCA: testpki.NewCA(t, "device CA")}
	f.caFile, _ = f.serverCA.WriteCA(t, f.dir, "server-ca")
	f.certFile, f.keyFile = f.serverCA.Issue(t, testpki.Loopback()).Write(t, f.dir, "server")
	clientCA, _ := f.fleetCA.WriteCA(t, f.dir, "fleet-ca")
	deviceCA, deviceKey := f.deviceCA.WriteCA(t, f.dir, "device-ca")
	f.srv = startServerProcess(t, testenv.Command(t, "aip-server"), "127.0.0.1:0", t.TempDir(),
		"--tls-cert", f.certFile, "--tls-key", f.keyFile, "--client-ca", clientCA,
		"--device-ca-cert", deviceCA, "--device-ca-key", deviceKey)
	roots := x509.NewCertPool()
	roots.AddCert(f.serverCA.Cert)
	f.srv.api.HTTP = api.HTTPClient(&tls.Config{RootCAs: roots})
	return f
}

// deviceCert writes a client certificate of ca naming device id, edited,
// and returns its files.
func (f *tlsFleet) deviceCert(ca *testpki.CA, id string, edit ...func(*testpki.Leaf)) (cert, key string) {
	f.t.Helper()
	l := testpki.Device(id)
	for _, e := range edit {
		e(&l)
	}
	return ca.Issue(f.t, l).Write(f.t, f.t.TempDir(), id)
}

// tlsAgent is an agent of the fleet running in the test, and its logs.
type tlsAgent struct {
	*runningAgent
	logs *testenv.LogBuffer
}

// start runs an agent for id that trusts the server's CA, configured
// further by edit, and returns it without waiting for it to link up.
func (f *tlsFleet) start(id string, edit func(*agent.Config)) *tlsAgent {
	f.t.Helper()
	logs := &testenv.LogBuffer{}
	cfg := agent.Config{ID: id, ServerURL: f.srv.wsURL(), CAFile: f.caFile, DataDir: f.t.TempDir(),
		ToolDirs: []string{"fixtures=" + testenv.TestdataTools()}, CompileCacheDir: sharedCompileCache(f.t),
		HeartbeatInterval: 100 * time.Millisecond, ShutdownGrace: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	edit(&cfg)
	return &tlsAgent{runningAgent: runAgent(f.t, cfg), logs: logs}
}

// enroll enrolls id and returns a token file for it.
func (f *tlsFleet) enroll(id string) string {
	f.t.Helper()
	tf := filepath.Join(f.t.TempDir(), id+".token")
	require.NoError(f.t, os.WriteFile(tf, []byte(f.srv.enrollToken(f.t, id)), 0o600))
	return tf
}

func (f *tlsFleet) waitOnline(id string) {
	f.t.Helper()
	require.Eventually(f.t, func() bool { return f.srv.online(f.t, id) }, 30*time.Second, 20*time.Millisecond, "%s never came online", id)
}

// echoes requires id to run a tool.
func (f *tlsFleet) echoes(id string) {
	f.t.Helper()
	resp, err := f.srv.api.Command(context.Background(), id, api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
	require.NoError(f.t, err)
	require.True(f.t, resp.Succeeded(), "%+v", resp.Results)
}

// waitLogged waits until every one of want is in logs.
func waitLogged(t *testing.T, who string, logs *testenv.LogBuffer, want ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		s := logs.String()
		for _, w := range want {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "%s never logged all of %q:\n%s", who, want, logs.String())
}

// One server over TLS: a device with a token, one with a certificate of
// the fleet's CA, and one whose request the server signed, all with no
// token but their certificate; each runs a tool. A certificate of another
// CA, an expired one, a revoked device's and a server the agent does not
// trust are refused, each with a clear error in the agent's log and the
// server's. SIGHUP reloads the server's certificate and keeps the links.
func TestTLSAndDeviceCertificatesEndToEnd(t *testing.T) {
	f := newTLSFleet(t)
	ctx := context.Background()

	tokenFile := f.enroll("by-token")
	byToken := f.start("by-token", func(c *agent.Config) { c.TokenFile = tokenFile })
	f.srv.enrollToken(t, "by-cert")
	byCert := f.start("by-cert", func(c *agent.Config) { c.CertFile, c.KeyFile = f.deviceCert(f.fleetCA, "by-cert") })
	csr, key := testpki.Request(t, "signed")
	enrolled, err := f.srv.api.Enroll(ctx, api.EnrollRequest{ID: "signed", CSR: string(csr)})
	require.NoError(t, err)
	signedCert, signedKey := filepath.Join(t.TempDir(), "signed.crt"), filepath.Join(t.TempDir(), "signed.key")
	require.NoError(t, os.WriteFile(signedCert, []byte(enrolled.Certificate), 0o644))
	require.NoError(t, os.WriteFile(signedKey, key, 0o600))
	signed := f.start("signed", func(c *agent.Config) { c.CertFile, c.KeyFile = signedCert, signedKey })
	for _, id := range []string{"by-token", "by-cert", "signed"} {
		f.waitOnline(id)
		f.echoes(id)
	}

	t.Run("a certificate of a CA the server does not trust", func(t *testing.T) {
		f.srv.enrollToken(t, "stranger")
		a := f.start("stranger", func(c *agent.Config) {
			c.CertFile, c.KeyFile = f.deviceCert(testpki.NewCA(t, "stranger CA"), "stranger")
		})
		waitLogged(t, "the agent", a.logs, "the server refused the device certificate, though it has not expired: is it signed by a CA the server trusts")
		waitLogged(t, "the server", &f.srv.logs, "device certificate refused at the TLS handshake", "device=stranger", "certificate signed by unknown authority")
		a.stop()
	})
	t.Run("an expired certificate", func(t *testing.T) {
		f.srv.enrollToken(t, "expired")
		a := f.start("expired", func(c *agent.Config) {
			c.CertFile, c.KeyFile = f.deviceCert(f.fleetCA, "expired", func(l *testpki.Leaf) {
				l.NotBefore, l.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
			})
		})
		waitLogged(t, "the agent", a.logs, "the server refused the device certificate, which expired at")
		waitLogged(t, "the server", &f.srv.logs, "device=expired", "certificate has expired or is not yet valid")
		a.stop()
	})
	t.Run("a revoked device's certificate", func(t *testing.T) {
		require.NoError(t, f.srv.api.Revoke(ctx, "by-cert"))
		waitLogged(t, "the agent", byCert.logs, `server refused the device (401 device certificate refused: certificate`, `of device \"by-cert\": revoked with the device at`)
		waitLogged(t, "the server", &f.srv.logs, "connection refused at upgrade", `of device \"by-cert\": revoked with the device at`)
		byCert.stop()
	})
	t.Run("a server the agent does not trust", func(t *testing.T) {
		untrusting := f.enroll("untrusting")
		a := f.start("untrusting", func(c *agent.Config) { c.TokenFile, c.CAFile = untrusting, "" })
		waitLogged(t, "the agent", a.logs, "the server's certificate is not trusted (give the CA that signed it as --ca, server.ca)", "certificate signed by unknown authority")
		waitLogged(t, "the server", &f.srv.logs, "TLS handshake error", "remote error: tls: bad certificate")
		a.stop()
	})

	t.Run("SIGHUP reloads the certificate and keeps the links", func(t *testing.T) {
		registered := map[*tlsAgent]int{byToken: countRegistered(byToken), signed: countRegistered(signed)}
		next := f.serverCA.Issue(t, testpki.Loopback())
		next.Write(t, f.dir, "server")
		require.NoError(t, f.srv.cmd.Process.Signal(syscall.SIGHUP))
		waitLogged(t, "the server", &f.srv.logs, "TLS files reloaded")
		assert.Equal(t, next.Cert.SerialNumber.String(), servedSerial(t, f))
		for a, n := range registered {
			assert.Equal(t, n, countRegistered(a), "the agent linked up again")
		}
		f.echoes("by-token")
		f.echoes("signed")
	})
}

// countRegistered counts the times an agent registered.
func countRegistered(a *tlsAgent) int { return strings.Count(a.logs.String(), "msg=registered") }

// servedSerial is the serial of the certificate a new connection to the
// fleet's server gets.
func servedSerial(t *testing.T, f *tlsFleet) string {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(f.serverCA.Cert)
	conn, err := tls.Dial("tcp", f.srv.addr, &tls.Config{RootCAs: roots})
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}
