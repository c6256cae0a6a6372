package server

import (
	"crypto/tls"
	"errors"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/certs"
	"github.com/edgeaip/edgeaip/server/internal/identity"
)

// TLSFiles name the PEM files of the server's TLS. Without Cert and Key
// the server speaks plain HTTP, as behind a proxy that terminates TLS.
type TLSFiles struct {
	// Cert and Key serve HTTPS and WSS: the server's certificate chain
	// and its private key.
	Cert, Key string
	// ClientCA holds the CAs whose device certificates stand in for a
	// device's token: a certificate they signed for client authentication
	// that names device ID by the DNS name ID.devices.edgeaip
	// (protocol.DeviceCertName), of a device enrolled and not revoked.
	ClientCA string
	// DeviceCACert and DeviceCAKey are a CA with which the server signs
	// devices' certificate requests (POST /api/devices/{id}/certificate,
	// aipctl device enroll --csr). Its certificates are taken as
	// ClientCA's are.
	DeviceCACert, DeviceCAKey string
	// DeviceCertValidity is how long a certificate the server signs is
	// valid, at most as long as the device CA. Default
	// DefaultDeviceCertValidity.
	DeviceCertValidity time.Duration
}

// DefaultDeviceCertValidity is how long a device certificate the server
// signs is valid by default: a year.
const DefaultDeviceCertValidity = identity.DefaultDeviceCertValidity

// load reads the files, or returns nil for plain HTTP.
func (f TLSFiles) load() (*certs.Set, error) {
	if f.Cert == "" && f.Key == "" {
		if f.ClientCA != "" || f.DeviceCACert != "" || f.DeviceCAKey != "" {
			return nil, errors.New("device certificates need TLS: give the server's certificate and key too (--tls-cert, --tls-key)")
		}
		return nil, nil
	}
	return certs.Load(certs.Files{Cert: f.Cert, Key: f.Key, ClientCA: f.ClientCA, SignerCert: f.DeviceCACert, SignerKey: f.DeviceCAKey})
}

// TLSConfig is what to serve Handler with over TLS, or nil when the
// server has no TLS files. It serves the certificate as last (re)loaded.
func (s *Server) TLSConfig() *tls.Config { return s.auth.TLSConfig() }

// ReloadTLS reads the TLS files again (on SIGHUP): new connections get
// what they now hold, and those up keep going. On an error the server
// keeps what it had.
func (s *Server) ReloadTLS() error { return s.auth.ReloadTLS() }
