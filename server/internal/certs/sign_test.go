package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testpki"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// signer loads a Set whose device CA is ca.
func signer(t *testing.T, ca *testpki.CA) *Set {
	t.Helper()
	dir := t.TempDir()
	var f Files
	f.Cert, f.Key = ca.Issue(t, testpki.Loopback()).Write(t, dir, "server")
	f.SignerCert, f.SignerKey = ca.WriteCA(t, dir, "ca")
	s, err := Load(f)
	require.NoError(t, err)
	return s
}

func request(t *testing.T, key crypto.Signer, req *x509.CertificateRequest) []byte {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, req, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// The signer decides what the certificate says: what the request asks for
// beyond its key is ignored.
func TestASignedCertificateSaysWhatTheSignerDecides(t *testing.T) {
	ca := testpki.NewCA(t, "device CA")
	s := signer(t, ca)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	csr := request(t, key, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "root"},
		DNSNames: []string{"admin.devices.edgeaip", "bank.example"}})

	cert, pemBytes, err := s.Sign(csr, "kiosk-1.devices.edgeaip", time.Hour)
	require.NoError(t, err)
	assert.Equal(t, "kiosk-1.devices.edgeaip", cert.Subject.CommonName)
	assert.Equal(t, []string{"kiosk-1.devices.edgeaip"}, cert.DNSNames)
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, cert.ExtKeyUsage)
	assert.False(t, cert.IsCA)
	assert.WithinDuration(t, time.Now().Add(time.Hour), cert.NotAfter, time.Minute)
	assert.True(t, cert.PublicKey.(*ecdsa.PublicKey).Equal(key.Public()))
	block, _ := pem.Decode(pemBytes)
	require.NotNil(t, block)
	assert.Equal(t, cert.Raw, block.Bytes)

	long, _, err := s.Sign(csr, "kiosk-1.devices.edgeaip", 10*365*24*time.Hour)
	require.NoError(t, err)
	assert.Equal(t, ca.Cert.NotAfter.Unix(), long.NotAfter.Unix(), "never past the CA")
	assert.NotEqual(t, cert.SerialNumber, long.SerialNumber)
}

func TestRequestsThatCannotBeSignedAreRefusedSayingWhy(t *testing.T) {
	s := signer(t, testpki.NewCA(t, "device CA"))
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	require.NoError(t, err)
	good, _ := testpki.Request(t, "kiosk-1")
	tampered := []byte(string(good))
	block, _ := pem.Decode(tampered)
	block.Bytes[len(block.Bytes)-1] ^= 0xff
	for name, c := range map[string]struct {
		csr  []byte
		want string
	}{
		"not PEM":           {[]byte("hello"), "not a PEM certificate request"},
		"a weak RSA key":    {request(t, weak, &x509.CertificateRequest{}), "RSA key of 1024 bits: want at least 2048"},
		"a curve we refuse": {request(t, p224, &x509.CertificateRequest{}), "ECDSA curve P-224"},
		"a bad signature":   {pem.EncodeToMemory(block), "not signed by its own key"},
	} {
		_, _, err := s.Sign(c.csr, "kiosk-1.devices.edgeaip", time.Hour)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), c.want, name)
	}
}

func TestWithoutADeviceCANothingIsSigned(t *testing.T) {
	ca := testpki.NewCA(t, "CA")
	var f Files
	f.Cert, f.Key = ca.Issue(t, testpki.Loopback()).Write(t, t.TempDir(), "server")
	s, err := Load(f)
	require.NoError(t, err)
	csr, _ := testpki.Request(t, "kiosk-1")
	_, _, err = s.Sign(csr, "kiosk-1.devices.edgeaip", time.Hour)
	assert.ErrorIs(t, err, ErrNoSigner)
	assert.False(t, s.VerifiesClients())
}
