package identity

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/certs"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// Principal is who a connection's credentials belong to: an enrolled
// device, or an operator identity (for constellation clients).
type Principal struct {
	// Device is the device, or nil.
	Device *store.Device
	// Operator is the operator identity, or nil.
	Operator *Caller
}

// authError is a refused connection's reason, as the server logs it, and
// what the client is told: a refused token learns nothing, unless it was
// revoked (RevokedError), a refused certificate why, since only a holder
// of a certificate the server's CAs signed can get that far. A failed one is a token no one holds (any
// more): it is ErrWrongToken, and counts toward its source's limit of
// failures.
type authError struct {
	err    error
	public string
	failed bool
}

func (e *authError) Error() string        { return e.err.Error() }
func (e *authError) Unwrap() error        { return e.err }
func (e *authError) Is(target error) bool { return e.failed && target == ErrWrongToken }

// refusedToken is a token refused for err: the client is told only that
// it is unauthorized.
func refusedToken(err error) error { return &authError{err: err, public: "unauthorized"} }

// wrongToken is a token refused for err, as refusedToken, that counts as a
// failed authentication: unknown, or retired past its grace.
func wrongToken(err error) error {
	return &authError{err: err, public: "unauthorized", failed: true}
}

// refusedCertificate is a device certificate refused for err, which the
// client is told.
func refusedCertificate(err error) error {
	return &authError{err: err, public: "device certificate refused: " + err.Error()}
}

// PublicReason is what a client whose connection was refused for err is
// told.
func PublicReason(err error) string {
	var ae *authError
	if errors.As(err, &ae) {
		return ae.public
	}
	return "unauthorized"
}

// AuthClient finds whom the request's credentials belong to: a device
// certificate the TLS handshake verified, if the client presented one
// that names a device, or else a token, a device's or an operator
// identity's. Tokens are looked up by their hash, which reveals nothing
// about a token not yet known.
func (a *Authority) AuthClient(r *http.Request) (Principal, error) {
	if leaf := a.clientCertificate(r); leaf != nil {
		id, err := protocol.DeviceOfCert(leaf)
		if err != nil {
			return Principal{}, refusedCertificate(err)
		}
		if id != "" {
			return a.authByCertificate(r.Context(), id, leaf)
		}
	}
	token := RequestToken(r, true)
	if token == "" {
		return Principal{}, refusedToken(errors.New("no token, and no device certificate"))
	}
	return a.authByToken(r.Context(), token)
}

// clientCertificate is the certificate the client presented, which the
// handshake verified against the client CAs (certs.Set.TLSConfig), or
// nil.
func (a *Authority) clientCertificate(r *http.Request) *x509.Certificate {
	if a.certs == nil || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil
	}
	return r.TLS.PeerCertificates[0]
}

// authByToken finds the device one of whose tokens is token, or else the
// operator identity it belongs to. A rotation's new token confirms the
// rotation; a token a rotation retired works until its grace ends.
func (a *Authority) authByToken(ctx context.Context, token string) (Principal, error) {
	hash := HashToken(token)
	m, err := a.store.Devices().ByToken(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return a.authOperator(ctx, token)
	}
	if err != nil {
		return Principal{}, refusedToken(err)
	}
	dev := &m.Device
	switch m.Kind {
	case store.TokenSent:
		a.ConfirmRotation(ctx, dev.ID, hash, "the device connected with its new token")
	case store.TokenRetired:
		if !a.now().Before(m.Until) {
			return Principal{}, wrongToken(fmt.Errorf("token of device %q was retired by a rotation at %s, and its grace ended at %s",
				dev.ID, m.RetiredAt.UTC().Format(time.RFC3339), m.Until.UTC().Format(time.RFC3339)))
		}
		a.log.Warn("device connected with its old token, within the grace of its rotation", "device", dev.ID, "until", m.Until)
	}
	return Principal{Device: dev}, nil
}

// authOperator finds the operator identity token belongs to, for a
// constellation client.
func (a *Authority) authOperator(ctx context.Context, token string) (Principal, error) {
	c, err := a.CallerByToken(ctx, token)
	var revoked *RevokedError
	switch {
	case errors.As(err, &revoked):
		return Principal{}, &authError{err: revoked, public: revoked.Error(), failed: true}
	case errors.Is(err, ErrWrongToken):
		return Principal{}, wrongToken(errors.New("unknown token: no device's, and no live operator token"))
	}
	if err != nil {
		return Principal{}, refusedToken(err)
	}
	return Principal{Operator: c}, nil
}

// authByCertificate checks a verified certificate naming device id
// against the device's enrollment: the device must be enrolled, and the
// certificate not revoked with an earlier enrollment of its id. A
// certificate first seen is recorded, so that revoking the device revokes
// it for good.
func (a *Authority) authByCertificate(ctx context.Context, id string, leaf *x509.Certificate) (Principal, error) {
	desc := fmt.Sprintf("certificate %s of device %q", certs.Describe(leaf), id)
	if a.now().After(leaf.NotAfter) {
		return Principal{}, refusedCertificate(fmt.Errorf("%s: expired", desc))
	}
	known, err := a.store.Devices().Certificate(ctx, certs.Fingerprint(leaf))
	switch {
	case err == nil && !known.RevokedAt.IsZero():
		return Principal{}, refusedCertificate(fmt.Errorf("%s: revoked with the device at %s", desc, known.RevokedAt.UTC().Format(time.RFC3339)))
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return Principal{}, refusedCertificate(fmt.Errorf("%s: %w", desc, err))
	}
	dev, err := a.store.Devices().Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, refusedCertificate(fmt.Errorf("%s: the device is not enrolled (revoked, or never enrolled)", desc))
	}
	if err != nil {
		return Principal{}, refusedCertificate(fmt.Errorf("%s: %w", desc, err))
	}
	if known.SHA256 == "" {
		seen := store.DeviceCert{SHA256: certs.Fingerprint(leaf), DeviceID: id, Serial: fmt.Sprintf("%x", leaf.SerialNumber), NotAfter: leaf.NotAfter}
		if err := a.store.Write(ctx, func(tx *store.Tx) error { return tx.Devices().AddCertificate(seen) }); err != nil {
			return Principal{}, refusedCertificate(fmt.Errorf("%s: %w", desc, err))
		}
	}
	return Principal{Device: &dev}, nil
}
