// Package testpki makes certificate authorities and certificates for
// tests, with crypto/x509: a CA, a server certificate for loopback,
// device certificates good, expired or from another CA, and certificate
// requests. Keys are ECDSA P-256, which is quick to generate.
package testpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/require"
)

// CA is a certificate authority a test made.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewCA makes a CA named name, valid from an hour ago for a day.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &CA{Cert: cert, Key: key}
}

// CertPEM is the CA's certificate, PEM-encoded.
func (ca *CA) CertPEM() []byte { return certPEM(ca.Cert) }

// WriteCA writes the CA's certificate and key into dir as NAME.crt and
// NAME.key, and returns their paths.
func (ca *CA) WriteCA(t testing.TB, dir, name string) (certPath, keyPath string) {
	t.Helper()
	return writePair(t, dir, name, ca.CertPEM(), keyPEM(t, ca.Key))
}

// Leaf describes a certificate to issue.
type Leaf struct {
	Name     string   // subject common name
	DNSNames []string // subject alternative names
	IPs      []net.IP
	// Server and Client set the extended key usages.
	Server, Client bool
	// NotBefore and NotAfter default to an hour ago and a day from now.
	NotBefore, NotAfter time.Time
}

// Issued is a certificate the CA signed, with its key.
type Issued struct {
	Cert            *x509.Certificate
	CertPEM, KeyPEM []byte
}

// Issue signs a certificate for a new key as l describes it.
func (ca *CA) Issue(t testing.TB, l Leaf) Issued {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: l.Name},
		DNSNames:     l.DNSNames,
		IPAddresses:  l.IPs,
		NotBefore:    l.NotBefore,
		NotAfter:     l.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = time.Now().Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	}
	if l.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if l.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return Issued{Cert: cert, CertPEM: certPEM(cert), KeyPEM: keyPEM(t, key)}
}

// Device describes a client certificate for device id, naming it as the
// server expects (protocol.DeviceCertName).
func Device(id string) Leaf {
	return Leaf{Name: id, DNSNames: []string{protocol.DeviceCertName(id)}, Client: true}
}

// Loopback describes a server certificate for 127.0.0.1 and localhost.
func Loopback() Leaf {
	return Leaf{Name: "localhost", DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, Server: true}
}

// Write writes the certificate and its key into dir as NAME.crt and
// NAME.key, and returns their paths.
func (i Issued) Write(t testing.TB, dir, name string) (certPath, keyPath string) {
	t.Helper()
	return writePair(t, dir, name, i.CertPEM, i.KeyPEM)
}

// Request makes a new key and a PEM certificate request for it, naming
// cn, and returns both, PEM-encoded.
func Request(t testing.TB, cn string) (csrPEM, keyPEMBytes []byte) {
	t.Helper()
	key := newKey(t)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), keyPEM(t, key)
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	require.NoError(t, err)
	return n
}

func certPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func keyPEM(t testing.TB, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func writePair(t testing.TB, dir, name string, cert, key []byte) (string, string) {
	t.Helper()
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	require.NoError(t, os.WriteFile(certPath, cert, 0o644))
	require.NoError(t, os.WriteFile(keyPath, key, 0o600))
	return certPath, keyPath
}
