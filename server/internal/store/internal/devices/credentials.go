package devices

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// TokenRotation is a rotation of a device's token that the operator asked
// for and the device has not confirmed.
type TokenRotation struct {
	// Grace is how long the old token keeps working once the device has
	// confirmed the new one.
	Grace       time.Duration
	RequestedAt time.Time
	// SentAt is when a new token last went to the device; zero if none
	// has yet.
	SentAt time.Time
	// Error is why the device, or its link, last could not take one.
	Error string
}

// nullRotation scans the columns of a TokenRotation that a LEFT JOIN may
// leave NULL.
type nullRotation struct {
	grace                sql.NullInt64
	requested, sent, err sql.NullString
}

func (n nullRotation) value() *TokenRotation {
	if !n.requested.Valid {
		return nil
	}
	return &TokenRotation{Grace: time.Duration(n.grace.Int64), RequestedAt: sqlrow.ParseTime(n.requested),
		SentAt: sqlrow.ParseTime(n.sent), Error: n.err.String}
}

// TokenKind says which of a device's tokens a token is.
type TokenKind string

// The kinds of token.
const (
	// TokenCurrent is the device's token.
	TokenCurrent TokenKind = "current"
	// TokenSent is the new token of a rotation, sent to the device and not
	// yet confirmed: it works, and using it confirms the rotation.
	TokenSent TokenKind = "sent"
	// TokenRetired is a token a confirmed rotation replaced: it works
	// until its grace ends.
	TokenRetired TokenKind = "retired"
)

// TokenMatch is the device a token belongs to, and which of its tokens
// it is.
type TokenMatch struct {
	Device Device
	Kind   TokenKind
	// RetiredAt and Until are a retired token's: when its rotation was
	// confirmed and when its grace ends.
	RetiredAt, Until time.Time
}

// ByToken finds the device one of whose tokens hashes to hash, or
// sqlrow.ErrNotFound.
func (q Reads) ByToken(ctx context.Context, hash string) (TokenMatch, error) {
	var (
		m                TokenMatch
		id               string
		retiredAt, until sql.NullString
	)
	err := q.r.ReadRow(ctx, `SELECT id, 'current', NULL, NULL FROM devices WHERE token_hash = ?
		UNION ALL SELECT device_id, 'sent', NULL, NULL FROM token_rotations WHERE sent_hash = ?
		UNION ALL SELECT device_id, 'retired', retired_at, until FROM retired_tokens WHERE hash = ?
		LIMIT 1`, hash, hash, hash).Scan(&id, &m.Kind, &retiredAt, &until)
	if err != nil {
		return m, sqlrow.Err(err, "device by token")
	}
	m.RetiredAt, m.Until = sqlrow.ParseTime(retiredAt), sqlrow.ParseTime(until)
	m.Device, err = q.Get(ctx, id)
	return m, err
}

// RequestRotation asks for a rotation of device id's token, whose old
// token is to keep working for grace once the device confirms the new
// one. A rotation already pending stays as it is, with this grace. It
// fails with sqlrow.ErrNotFound if the device is not enrolled.
func (w Writes) RequestRotation(id string, grace time.Duration) error {
	var one int
	if err := w.t.QueryRow(`SELECT 1 FROM devices WHERE id = ?`, id).Scan(&one); err != nil {
		return sqlrow.Err(err, "device %q", id)
	}
	_, err := w.t.Exec(`INSERT INTO token_rotations (device_id, grace_ns, requested_at) VALUES (?, ?, ?)
		ON CONFLICT (device_id) DO UPDATE SET grace_ns = excluded.grace_ns`, id, int64(grace), sqlrow.Now())
	if err != nil {
		return fmt.Errorf("store: device %q: request a token rotation: %w", id, err)
	}
	return nil
}

// SendRotation records that a new token, hashing to hash, goes to device
// id for its pending rotation: it works from now on, in place of any sent
// before. It fails with sqlrow.ErrNotFound if no rotation is pending.
func (w Writes) SendRotation(id, hash string) error {
	res, err := w.t.Exec(`UPDATE token_rotations SET sent_hash = ?, sent_at = ?, error = '' WHERE device_id = ?`, hash, sqlrow.Now(), id)
	return oneRow(res, err, "device %q: send a new token", id)
}

// FailRotation records why device id could not take a new token. The
// rotation stays pending.
func (w Writes) FailRotation(id, why string) error {
	res, err := w.t.Exec(`UPDATE token_rotations SET error = ? WHERE device_id = ?`, why, id)
	return oneRow(res, err, "device %q: record a failed token rotation", id)
}

// ConfirmRotation makes the sent token hashing to hash device id's token:
// the one it replaces is retired, and works until the rotation's grace
// ends. It fails with sqlrow.ErrNotFound if that is not the token sent for a
// pending rotation of id.
func (w Writes) ConfirmRotation(id, hash string) error {
	var grace int64
	err := w.t.QueryRow(`SELECT grace_ns FROM token_rotations WHERE device_id = ? AND sent_hash = ?`, id, hash).Scan(&grace)
	if err != nil {
		return sqlrow.Err(err, "device %q: confirm a token rotation", id)
	}
	at := time.Now()
	if _, err := w.t.Exec(`INSERT INTO retired_tokens (hash, device_id, retired_at, until) SELECT token_hash, id, ?, ? FROM devices WHERE id = ?`,
		sqlrow.FormatTime(at), sqlrow.FormatTime(at.Add(time.Duration(grace))), id); err != nil {
		return fmt.Errorf("store: device %q: retire its token: %w", id, err)
	}
	if _, err := w.t.Exec(`UPDATE devices SET token_hash = ? WHERE id = ?`, hash, id); err != nil {
		return fmt.Errorf("store: device %q: take its new token: %w", id, err)
	}
	if _, err := w.t.Exec(`DELETE FROM token_rotations WHERE device_id = ?`, id); err != nil {
		return fmt.Errorf("store: device %q: end its token rotation: %w", id, err)
	}
	return nil
}

// DeviceCert is a device certificate the store knows: one the server
// signed, or one a device presented.
type DeviceCert struct {
	SHA256    string // of the certificate's DER, hex
	DeviceID  string
	Serial    string // hex
	NotAfter  time.Time
	Signed    bool // signed by this server; else seen when a device presented it
	CreatedAt time.Time
	RevokedAt time.Time // zero unless its device was revoked
}

// AddCertificate records c, unless a certificate with its digest is
// recorded already.
func (w Writes) AddCertificate(c DeviceCert) error {
	_, err := w.t.Exec(`INSERT INTO device_certificates (sha256, device_id, serial, not_after, signed, created_at)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING`,
		c.SHA256, c.DeviceID, c.Serial, sqlrow.FormatTime(c.NotAfter), c.Signed, sqlrow.Now())
	if err != nil {
		return fmt.Errorf("store: device %q: record certificate %s: %w", c.DeviceID, c.Serial, err)
	}
	return nil
}

// Certificate returns the certificate whose DER hashes to sha256, or
// sqlrow.ErrNotFound.
func (q Reads) Certificate(ctx context.Context, sha256 string) (DeviceCert, error) {
	var (
		c                          DeviceCert
		notAfter, created, revoked sql.NullString
	)
	err := q.r.ReadRow(ctx, `SELECT sha256, device_id, serial, not_after, signed, created_at, revoked_at
		FROM device_certificates WHERE sha256 = ?`, sha256).
		Scan(&c.SHA256, &c.DeviceID, &c.Serial, &notAfter, &c.Signed, &created, &revoked)
	c.NotAfter, c.CreatedAt, c.RevokedAt = sqlrow.ParseTime(notAfter), sqlrow.ParseTime(created), sqlrow.ParseTime(revoked)
	return c, sqlrow.Err(err, "certificate %s", sha256)
}

// revokeCredentials ends a revoked device's rotation and retired tokens,
// and revokes its certificates.
func (w Writes) revokeCredentials(id string) error {
	if _, err := w.t.Exec(`DELETE FROM token_rotations WHERE device_id = ?`, id); err != nil {
		return fmt.Errorf("store: device %q: end its token rotation: %w", id, err)
	}
	if _, err := w.t.Exec(`DELETE FROM retired_tokens WHERE device_id = ?`, id); err != nil {
		return fmt.Errorf("store: device %q: forget its retired tokens: %w", id, err)
	}
	if _, err := w.t.Exec(`UPDATE device_certificates SET revoked_at = ? WHERE device_id = ? AND revoked_at IS NULL`, sqlrow.Now(), id); err != nil {
		return fmt.Errorf("store: device %q: revoke its certificates: %w", id, err)
	}
	return nil
}

// oneRow is the error of an update that must change one row, named by
// format and args: sqlrow.ErrNotFound if it changed none.
func oneRow(res sql.Result, err error, format string, args ...any) error {
	if err != nil {
		return fmt.Errorf("store: "+format+": %w", append(args, err)...)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: "+format+": %w", append(args, sqlrow.ErrNotFound)...)
	}
	return nil
}
