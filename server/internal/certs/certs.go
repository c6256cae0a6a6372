// Package certs is the server's TLS material: the certificate it serves
// HTTPS and WSS with, the CAs whose device certificates it takes in place
// of a token, and the CA with which it signs devices' certificate
// requests. Everything is read from PEM files, and read again on Reload,
// which the connections already up do not notice.
package certs

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/edgeaip/edgeaip/internal/tlsfiles"
)

// Files name the PEM files. Cert and Key are required; the rest are
// optional.
type Files struct {
	// Cert and Key are the server's certificate chain and private key.
	Cert, Key string
	// ClientCA holds the CAs whose client certificates the server
	// verifies.
	ClientCA string
	// SignerCert and SignerKey are the CA that signs devices' certificate
	// requests. Its certificates are verified as ClientCA's are.
	SignerCert, SignerKey string
}

// Set is the TLS material as last loaded from its Files. It is safe for
// concurrent use.
type Set struct {
	files Files
	cur   atomic.Pointer[loaded]
}

// loaded is one reading of the files.
type loaded struct {
	serving tls.Certificate
	clients *x509.CertPool // nil: no client certificates are asked for
	signer  *tls.Certificate
}

// Load reads the files.
func Load(f Files) (*Set, error) {
	s := &Set{files: f}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the files again. On an error it keeps what it had, so that
// a certificate being replaced, and read half-written, costs nothing.
func (s *Set) Reload() error {
	l, err := load(s.files)
	if err != nil {
		return err
	}
	s.cur.Store(l)
	return nil
}

func load(f Files) (*loaded, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("TLS needs both a certificate and its key")
	}
	serving, err := tlsfiles.KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("serving %w", err)
	}
	l := &loaded{serving: serving}
	if f.ClientCA != "" {
		cas, err := tlsfiles.Certificates(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
		l.clients = x509.NewCertPool()
		for _, c := range cas {
			l.clients.AddCert(c)
		}
	}
	if (f.SignerCert == "") != (f.SignerKey == "") {
		return nil, errors.New("the device CA needs both its certificate and its key")
	}
	if f.SignerCert != "" {
		signer, err := tlsfiles.KeyPair(f.SignerCert, f.SignerKey)
		if err != nil {
			return nil, fmt.Errorf("device CA %w", err)
		}
		if !signer.Leaf.IsCA || signer.Leaf.KeyUsage&x509.KeyUsageCertSign == 0 {
			return nil, fmt.Errorf("device CA certificate %s is not a CA that may sign certificates (basic constraints, key usage)", f.SignerCert)
		}
		l.signer = &signer
		if l.clients == nil {
			l.clients = x509.NewCertPool()
		}
		l.clients.AddCert(signer.Leaf)
	}
	return l, nil
}

// Serving is the certificate the server serves now.
func (s *Set) Serving() *x509.Certificate { return s.cur.Load().serving.Leaf }

// VerifiesClients reports whether the server asks for client
// certificates: whether it has a client CA or a device CA.
func (s *Set) VerifiesClients() bool { return s.cur.Load().clients != nil }

// Refused is told of each client certificate refused at a handshake, with
// the peer's address, the certificate (nil if it did not parse) and why.
type Refused func(remote net.Addr, leaf *x509.Certificate, err error)

// TLSConfig serves the current certificate, and asks for a client
// certificate when there are client CAs: one the client presents must
// verify against them, for client authentication, or the handshake fails
// and refused is told. A client that presents none may still
// authenticate otherwise (a device token, the operator's). Session
// tickets are off: a resumed session would skip that check. It speaks
// HTTP/1.1 only, which WebSocket upgrades need.
func (s *Set) TLSConfig(refused Refused) *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12, SessionTicketsDisabled: true, NextProtos: []string{"http/1.1"}}
	base.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		l := s.cur.Load()
		cfg := base.Clone()
		cfg.GetConfigForClient = nil
		cfg.Certificates = []tls.Certificate{l.serving}
		if l.clients != nil {
			cfg.ClientAuth = tls.RequestClientCert
			cfg.ClientCAs = l.clients
			remote := hello.Conn.RemoteAddr()
			cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
				leaf, err := verifyClient(raw, l.clients)
				if err != nil {
					refused(remote, leaf, err)
				}
				return err
			}
		}
		return cfg, nil
	}
	return base
}

// verifyClient verifies a client's chain, leaf first, against roots, for
// client authentication. It returns the leaf if it parses.
func verifyClient(raw [][]byte, roots *x509.CertPool) (*x509.Certificate, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	chain := make([]*x509.Certificate, len(raw))
	for i, der := range raw {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return chain[0], fmt.Errorf("client certificate %d does not parse: %w", i+1, err)
		}
		chain[i] = c
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := chain[0].Verify(opts); err != nil {
		return chain[0], fmt.Errorf("client certificate %s: %w", Describe(chain[0]), err)
	}
	return chain[0], nil
}

// Describe names a certificate in logs and errors: its subject, serial
// and validity.
func Describe(c *x509.Certificate) string {
	return fmt.Sprintf("%q (serial %x, valid %s to %s)", c.Subject.String(), c.SerialNumber,
		c.NotBefore.UTC().Format("2006-01-02T15:04:05Z"), c.NotAfter.UTC().Format("2006-01-02T15:04:05Z"))
}

// Fingerprint is the hex SHA-256 of a certificate's DER: how the store
// knows it.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}
