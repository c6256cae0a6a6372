package agent

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync"

	"github.com/edgeaip/edgeaip/internal/tlsfiles"
	"github.com/edgeaip/edgeaip/protocol"
)

// clientTLS is the TLS the link dials a wss:// server with: the server
// verified against CAFile, or the system's roots, and the device's
// certificate presented, if it has one. Nil when the config names no TLS
// file: the defaults then serve a wss:// URL.
func clientTLS(cfg Config, log *slog.Logger) (*tls.Config, error) {
	if cfg.CAFile == "" && cfg.CertFile == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pool, err := tlsfiles.CertPool(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("agent: CA: %w", err)
		}
		tc.RootCAs = pool
	}
	if cfg.CertFile != "" {
		dc := &deviceCert{certFile: cfg.CertFile, keyFile: cfg.KeyFile, id: cfg.ID, log: log}
		if _, err := dc.load(); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		if dc.names == "" && cfg.TokenFile == "" {
			return nil, fmt.Errorf("agent: device certificate %s names no device (want the DNS name %s), and there is no token file",
				cfg.CertFile, protocol.DeviceCertName(cfg.ID))
		}
		tc.GetClientCertificate = dc.present
	}
	return tc, nil
}

// deviceCert is the device's certificate, read again at each handshake,
// so that one renewed on disk is presented from the next connection on.
type deviceCert struct {
	certFile, keyFile, id string
	log                   *slog.Logger

	mu    sync.Mutex
	last  *tls.Certificate // the last that read well
	names string           // the device it names, "" if none
}

// load reads the certificate and its key, and refuses one that names
// another device: the server would take the device for that one.
func (d *deviceCert) load() (*tls.Certificate, error) {
	pair, err := tlsfiles.KeyPair(d.certFile, d.keyFile)
	if err != nil {
		return nil, fmt.Errorf("device %w", err)
	}
	names, err := protocol.DeviceOfCert(pair.Leaf)
	if err == nil && names != "" && names != d.id {
		err = fmt.Errorf("names device %q, not %q", names, d.id)
	}
	if err != nil {
		return nil, fmt.Errorf("device certificate %s: %w", d.certFile, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.last, d.names = &pair, names
	return &pair, nil
}

// present is tls.Config.GetClientCertificate: the certificate as it is on
// disk now, or, if that no longer reads, the last that did. It is
// presented whatever CAs the server names, so that a certificate the
// server does not trust is refused by the server, which says so, rather
// than left out.
func (d *deviceCert) present(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	pair, err := d.load()
	if err == nil {
		return pair, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last == nil {
		return nil, err
	}
	d.log.Warn("device certificate does not read; presenting the one read before", "err", err)
	return d.last, nil
}
