package identity

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/certs"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// TLSConfig is what to serve over TLS, or nil when there is no TLS
// material. It serves the certificate as last (re)loaded, and verifies
// device certificates against the client CAs.
func (a *Authority) TLSConfig() *tls.Config {
	if a.certs == nil {
		return nil
	}
	return a.certs.TLSConfig(a.certificateRefused)
}

// ReloadTLS reads the TLS files again: new connections get what they now
// hold, and those up keep going. On an error the Authority keeps what it
// had.
func (a *Authority) ReloadTLS() error {
	if a.certs == nil {
		return errors.New("reload TLS: the server has no TLS files")
	}
	if err := a.certs.Reload(); err != nil {
		return fmt.Errorf("reload TLS: %w", err)
	}
	a.log.Info("TLS files reloaded", "serving", certs.Describe(a.certs.Serving()))
	return nil
}

// certificateRefused logs a client certificate refused at the TLS
// handshake, naming the device it names, so that the operator can tell
// which device is locked out and why.
func (a *Authority) certificateRefused(remote net.Addr, leaf *x509.Certificate, err error) {
	log := a.log.With("remote", remote.String())
	if leaf != nil {
		id, _ := protocol.DeviceOfCert(leaf)
		log = log.With("device", id)
	}
	log.Warn("device certificate refused at the TLS handshake", "err", err)
}

// SignDeviceCertificate signs a certificate for device id from a PEM
// certificate request, with the device CA, with errors that name the
// field ("csr"). It returns the certificate and its PEM.
func (a *Authority) SignDeviceCertificate(id, csr string) (*x509.Certificate, []byte, error) {
	if a.certs == nil {
		return nil, nil, fmt.Errorf("field \"csr\": %w", certs.ErrNoSigner)
	}
	cert, pem, err := a.certs.Sign([]byte(csr), protocol.DeviceCertName(id), a.certValidity)
	if err != nil {
		return nil, nil, fmt.Errorf("field \"csr\": %w", err)
	}
	return cert, pem, nil
}

// SignedRecord is how the store knows a certificate signed for device id:
// revoking its device revokes it.
func SignedRecord(id string, c *x509.Certificate) store.DeviceCert {
	return store.DeviceCert{SHA256: certs.Fingerprint(c), DeviceID: id, Serial: fmt.Sprintf("%x", c.SerialNumber), NotAfter: c.NotAfter, Signed: true}
}
