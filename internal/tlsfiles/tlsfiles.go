// Package tlsfiles reads the PEM files TLS is configured with: CA bundles
// and certificate/key pairs, with errors that name the file and what is
// wrong with it. The server, the agent and aipctl read theirs through it.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

// CertPool reads the CA certificates of a PEM bundle.
func CertPool(path string) (*x509.CertPool, error) {
	certs, err := Certificates(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// Certificates reads every certificate of a PEM file; a file with none,
// or with one that does not parse, is an error.
func Certificates(path string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for rest := b; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d: %w", path, len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return out, nil
}

// KeyPair reads a certificate chain and its private key, and parses the
// chain's first certificate into Leaf.
func KeyPair(certPath, keyPath string) (tls.Certificate, error) {
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return pair, fmt.Errorf("certificate %s with key %s: %w", certPath, keyPath, err)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return pair, fmt.Errorf("certificate %s: %w", certPath, err)
		}
	}
	return pair, nil
}
