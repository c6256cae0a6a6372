package server

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

	"github.com/edgeaip/edgeaip/internal/testpki"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/httpapi/httpapitest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pki is a test's CA, the server's certificate from it, and the files
// the server reads them from.
type pki struct {
	ca    *testpki.CA
	dir   string
	files TLSFiles
}

// newPKI makes a CA that signs the server's certificate and is its
// client CA; with signer, the server signs devices' requests with it too.
func newPKI(t *testing.T, signer bool) *pki {
	t.Helper()
	p := &pki{ca: testpki.NewCA(t, "edgeaip test CA"), dir: t.TempDir()}
	p.files.Cert, p.files.Key = p.ca.Issue(t, testpki.Loopback()).Write(t, p.dir, "server")
	caCert, caKey := p.ca.WriteCA(t, p.dir, "ca")
	if signer {
		p.files.DeviceCACert, p.files.DeviceCAKey = caCert, caKey
	} else {
		p.files.ClientCA = caCert
	}
	return p
}

// deviceCert issues a client certificate for device id.
func (p *pki) deviceCert(t *testing.T, id string, edit ...func(*testpki.Leaf)) tls.Certificate {
	t.Helper()
	l := testpki.Device(id)
	for _, e := range edit {
		e(&l)
	}
	return keyPair(t, p.ca.Issue(t, l))
}

func keyPair(t *testing.T, i testpki.Issued) tls.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(i.CertPEM, i.KeyPEM)
	require.NoError(t, err)
	return pair
}

// newTLSTestServer is newTestServer serving HTTPS and WSS with p's files.
func newTLSTestServer(t *testing.T, p *pki) *testServer {
	t.Helper()
	ts := newTestServer(t, func(c *Config) { c.TLS = p.files })
	ts.http.Close()
	hs := httptest.NewUnstartedServer(httpapitest.Conformance(t, ts.srv.Handler()))
	hs.TLS = ts.srv.TLSConfig()
	hs.StartTLS()
	t.Cleanup(hs.Close)
	ts.http = hs
	ts.api.BaseURL = hs.URL
	ts.api.HTTP = p.client(nil)
	return ts
}

// client is an HTTP client that trusts p's CA and presents cert, if any.
func (p *pki) client(cert *tls.Certificate) *http.Client {
	roots := x509.NewCertPool()
	roots.AddCert(p.ca.Cert)
	cfg := &tls.Config{RootCAs: roots}
	if cert != nil {
		// Presented whatever CAs the server names, as the agent does, so
		// that the server judges it.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
}

// dialTLS connects over WSS with cert and token, either may be empty.
func (ts *testServer) dialTLS(p *pki, cert *tls.Certificate, token string) (*rawClient, *http.Response, error) {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, resp, err := protocol.Dial(ctx, ts.wsURL(), protocol.DialOptions{Header: h, Encoding: protocol.CBOR, HTTPClient: p.client(cert)})
	if err != nil {
		return nil, resp, err
	}
	ts.t.Cleanup(func() { conn.CloseNow() })
	return &rawClient{t: ts.t, conn: conn}, resp, nil
}

// certDevice enrolls id and links it with a certificate p's CA issues
// for it, and no token.
func (ts *testServer) certDevice(p *pki, id string) (*rawClient, tls.Certificate) {
	ts.t.Helper()
	ts.enroll(id)
	cert := p.deviceCert(ts.t, id)
	rc, _, err := ts.dialTLS(p, &cert, "")
	require.NoError(ts.t, err)
	rc.register(id)
	return rc, cert
}

// waitLogged waits for the server to log every one of want.
func (ts *testServer) waitLogged(want ...string) {
	ts.t.Helper()
	require.Eventually(ts.t, func() bool {
		logs := ts.logs.String()
		for _, w := range want {
			if !strings.Contains(logs, w) {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "the server never logged all of %q:\n%s", want, ts.logs.String())
}

// The API and the WebSocket are served over TLS; a device whose
// certificate names it needs no token, and registers as no one else.
func TestADeviceCertificateStandsInForTheToken(t *testing.T) {
	p := newPKI(t, false)
	ts := newTLSTestServer(t, p)
	require.True(t, strings.HasPrefix(ts.wsURL(), "wss://"))
	rc, cert := ts.certDevice(p, "kiosk-1")
	rc.ping()

	other, _, err := ts.dialTLS(p, &cert, "")
	require.NoError(t, err)
	other.send(protocol.ClientMessage{Type: protocol.ClientRegister, ClientType: protocol.ClientDevice, ClientID: "kiosk-2"})
	other.requireError(`field "client_id": "kiosk-2" does not match the device token's device "kiosk-1"`)

	// A client certificate that names no device leaves the token to say
	// who the client is.
	plain := keyPair(t, p.ca.Issue(t, testpki.Leaf{Name: "not a device", Client: true}))
	_, _, err = ts.dialTLS(p, &plain, "")
	require.Error(t, err)
	byToken, _, err := ts.dialTLS(p, &plain, ts.enroll("kiosk-2"))
	require.NoError(t, err)
	byToken.register("kiosk-2")
}

// A certificate of another CA, an expired one and one that names two
// devices are refused, and the server says which device and why.
func TestBadDeviceCertificatesAreRefusedSayingWhy(t *testing.T) {
	p := newPKI(t, false)
	ts := newTLSTestServer(t, p)
	ts.enroll("kiosk-1")
	stranger := &pki{ca: testpki.NewCA(t, "some other CA")}

	foreign := stranger.deviceCert(t, "kiosk-1")
	_, _, err := ts.dialTLS(p, &foreign, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "remote error: tls: bad certificate")
	ts.waitLogged("device certificate refused at the TLS handshake", "device=kiosk-1", "certificate signed by unknown authority")

	expired := p.deviceCert(t, "kiosk-1", func(l *testpki.Leaf) {
		l.NotBefore, l.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	})
	_, _, err = ts.dialTLS(p, &expired, "")
	require.Error(t, err)
	ts.waitLogged("certificate has expired or is not yet valid")

	both := p.deviceCert(t, "kiosk-1", func(l *testpki.Leaf) { l.DNSNames = append(l.DNSNames, protocol.DeviceCertName("kiosk-2")) })
	_, resp, err := ts.dialTLS(p, &both, "")
	require.Error(t, err)
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	ts.waitLogged(`names devices \"kiosk-1\" and \"kiosk-2\"`)
}

// A revoked device's certificate is refused though it has not expired,
// and stays refused once the id is enrolled again; the device is told
// why.
func TestARevokedDevicesCertificateIsRefused(t *testing.T) {
	p := newPKI(t, false)
	ts := newTLSTestServer(t, p)
	rc, cert := ts.certDevice(p, "kiosk-1")

	require.NoError(t, ts.api.Revoke(context.Background(), "kiosk-1"))
	rc.requireClosed()
	refusedCert(t, ts, p, cert, "revoked with the device at")
	ts.enroll("kiosk-1") // again: the certificate stays revoked
	refusedCert(t, ts, p, cert, "revoked with the device at")
	fresh := p.deviceCert(t, "kiosk-1")
	again, _, err := ts.dialTLS(p, &fresh, "")
	require.NoError(t, err, "a new certificate for the new enrollment works")
	again.register("kiosk-1")

	refusedCert(t, ts, p, p.deviceCert(t, "kiosk-9"), `device \"kiosk-9\": the device is not enrolled (revoked, or never enrolled)`)
}

// refusedCert requires a connection with cert to be refused with 401, the
// device and the server both told want.
func refusedCert(t *testing.T, ts *testServer, p *pki, cert tls.Certificate, want string) {
	t.Helper()
	_, resp, err := ts.dialTLS(p, &cert, "")
	require.Error(t, err)
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	body := readBody(t, resp)
	assert.Contains(t, body, "device certificate refused: certificate")
	assert.Contains(t, strings.ReplaceAll(body, `"`, `\"`), want)
	ts.waitLogged(want)
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	b := make([]byte, 1024)
	n, _ := resp.Body.Read(b)
	return string(b[:n])
}

// Enrolling with a certificate request gives the device a certificate
// that names it, for client authentication, signed by the device CA; a
// request that cannot be signed enrolls nothing.
func TestTheServerSignsDevicesCertificateRequests(t *testing.T) {
	p := newPKI(t, true)
	ts := newTLSTestServer(t, p)
	ctx := context.Background()
	csr, key := testpki.Request(t, "whatever the device asks")
	resp, err := ts.api.Enroll(ctx, api.EnrollRequest{ID: "kiosk-1", CSR: string(csr)})
	require.NoError(t, err)
	require.NotEmpty(t, resp.Certificate)
	pair, err := tls.X509KeyPair([]byte(resp.Certificate), key)
	require.NoError(t, err)
	leaf := pair.Leaf
	assert.Equal(t, []string{"kiosk-1.devices.edgeaip"}, leaf.DNSNames)
	assert.Equal(t, "kiosk-1.devices.edgeaip", leaf.Subject.CommonName)
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, leaf.ExtKeyUsage)
	assert.WithinDuration(t, p.ca.Cert.NotAfter, leaf.NotAfter, time.Second, "no longer than the CA")
	roots := x509.NewCertPool()
	roots.AddCert(p.ca.Cert)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err)

	rc, _, err := ts.dialTLS(p, &pair, "")
	require.NoError(t, err)
	rc.register("kiosk-1")

	renewed, err := ts.api.SignCertificate(ctx, "kiosk-1", api.CertificateRequest{CSR: string(csr)})
	require.NoError(t, err)
	assert.NotEqual(t, leaf.SerialNumber.Text(16), renewed.Serial)

	for _, c := range []struct {
		path string
		body any
		code int
		want string
	}{
		{"/api/devices", api.EnrollRequest{ID: "kiosk-2", CSR: "not pem"}, http.StatusBadRequest, `field "csr": not a PEM certificate request`},
		{"/api/devices/nobody/certificate", api.CertificateRequest{CSR: string(csr)}, http.StatusNotFound, `device "nobody" is not enrolled`},
		{"/api/devices/kiosk-1/certificate", api.CertificateRequest{CSR: string(resp.Certificate)}, http.StatusBadRequest, "not a PEM certificate request"},
	} {
		code, msg := ts.apiStatus("POST", c.path, c.body)
		assert.Equal(t, c.code, code, c.path)
		assert.Contains(t, msg, c.want)
	}
	_, err = ts.srv.store.Devices().Get(ctx, "kiosk-2")
	assert.Error(t, err, "a request that cannot be signed enrolls nothing")
}

func TestAServerWithoutADeviceCASignsNothing(t *testing.T) {
	ts := newTLSTestServer(t, newPKI(t, false))
	csr, _ := testpki.Request(t, "kiosk-1")
	code, msg := ts.apiStatus("POST", "/api/devices", api.EnrollRequest{ID: "kiosk-1", CSR: string(csr)})
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, msg, `field "csr": this server signs no device certificates: start it with --device-ca-cert and --device-ca-key`)
}

// Reloading the files changes the certificate new connections get; the
// links up go on, and a file that does not load changes nothing.
func TestReloadingTLSKeepsTheLinksUp(t *testing.T) {
	p := newPKI(t, false)
	ts := newTLSTestServer(t, p)
	rc, _ := ts.certDevice(p, "kiosk-1")
	before := servedSerial(t, ts, p)

	next := p.ca.Issue(t, testpki.Loopback())
	require.NoError(t, os.WriteFile(p.files.Cert, next.CertPEM, 0o644))
	require.NoError(t, os.WriteFile(p.files.Key, next.KeyPEM, 0o600))
	require.NoError(t, ts.srv.ReloadTLS())
	assert.Equal(t, next.Cert.SerialNumber.String(), servedSerial(t, ts, p))
	assert.NotEqual(t, before, next.Cert.SerialNumber.String())
	rc.ping()

	require.NoError(t, os.WriteFile(p.files.Key, []byte("half written"), 0o600))
	err := ts.srv.ReloadTLS()
	require.Error(t, err)
	assert.Contains(t, err.Error(), filepath.Base(p.files.Key))
	assert.Equal(t, next.Cert.SerialNumber.String(), servedSerial(t, ts, p), "a bad file changes nothing")
	rc.ping()
}

// servedSerial is the serial of the certificate a new connection gets.
func servedSerial(t *testing.T, ts *testServer, p *pki) string {
	t.Helper()
	conn, err := tls.Dial("tcp", ts.http.Listener.Addr().String(), p.client(nil).Transport.(*http.Transport).TLSClientConfig)
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func TestTLSFilesThatCannotWorkStopTheServer(t *testing.T) {
	p := newPKI(t, false)
	for name, c := range map[string]struct {
		files TLSFiles
		want  string
	}{
		"client CA without TLS": {TLSFiles{ClientCA: p.files.ClientCA}, "device certificates need TLS"},
		"no key":                {TLSFiles{Cert: p.files.Cert}, "TLS needs both a certificate and its key"},
		"a device CA that is not a CA": {TLSFiles{Cert: p.files.Cert, Key: p.files.Key, DeviceCACert: p.files.Cert, DeviceCAKey: p.files.Key},
			"is not a CA that may sign certificates"},
		"a client CA file without certificates": {TLSFiles{Cert: p.files.Cert, Key: p.files.Key, ClientCA: p.files.Key}, "no PEM certificate in it"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			_, err := New(context.Background(), Config{DataDir: dir, TLS: c.files})
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			_, statErr := os.Stat(dir)
			assert.True(t, os.IsNotExist(statErr), "nothing was written")
		})
	}
}
