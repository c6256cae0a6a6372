package certs

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// ErrNoSigner is Sign's error on a server without a device CA.
var ErrNoSigner = errors.New("this server signs no device certificates: start it with --device-ca-cert and --device-ca-key")

// backdate is how far before its signing a certificate becomes valid:
// for a server whose clock is a little behind the signing one's.
const backdate = 5 * time.Minute

// Sign checks a PEM certificate request and signs a client certificate
// for its key, valid for validity (no longer than the CA itself), whose
// subject is name and whose one DNS name is name. Whatever else the
// request asks for is ignored: the signer decides what the certificate
// says.
func (s *Set) Sign(csrPEM []byte, name string, validity time.Duration) (*x509.Certificate, []byte, error) {
	ca := s.cur.Load().signer
	if ca == nil {
		return nil, nil, ErrNoSigner
	}
	csr, err := parseRequest(csrPEM)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, nil, fmt.Errorf("serial number: %w", err)
	}
	now := time.Now()
	notAfter := now.Add(validity)
	if notAfter.After(ca.Leaf.NotAfter) {
		notAfter = ca.Leaf.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		DNSNames:              []string{name},
		NotBefore:             now.Add(-backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Leaf, csr.PublicKey, ca.PrivateKey)
	if err != nil {
		return nil, nil, fmt.Errorf("sign: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("sign: %w", err)
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// parseRequest reads a PEM certificate request, signed by the key it
// carries, which must be one a TLS client can use and strong enough.
func parseRequest(b []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errors.New("not a PEM certificate request (-----BEGIN CERTIFICATE REQUEST-----)")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("certificate request: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("certificate request: not signed by its own key: %w", err)
	}
	switch k := csr.PublicKey.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() && k.Curve != elliptic.P521() {
			return nil, fmt.Errorf("certificate request: ECDSA curve %s: want P-256, P-384 or P-521", k.Curve.Params().Name)
		}
	case ed25519.PublicKey:
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return nil, fmt.Errorf("certificate request: RSA key of %d bits: want at least 2048", k.N.BitLen())
		}
	default:
		return nil, fmt.Errorf("certificate request: key of type %T: want ECDSA, Ed25519 or RSA", csr.PublicKey)
	}
	return csr, nil
}
