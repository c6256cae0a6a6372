package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// Device is an enrolled device. Only a hash of its token is kept.
type Device struct {
	ID        string
	TokenHash string
	Labels    map[string]string
	CreatedAt time.Time
	LastSeen  time.Time       // zero if never connected
	Info      json.RawMessage // the SystemInfo of its last registration, or nil
	// Wire is the encoding of its last link, "cbor" or "json"; "" if it
	// never linked.
	Wire string
	// Rotation is a rotation of its token that it has not confirmed, or
	// nil.
	Rotation *TokenRotation
}

// CreateDevice enrolls a device. It fails with ErrExists if the id is taken.
func (t *Tx) CreateDevice(id, tokenHash string, labels map[string]string) error {
	if labels == nil {
		labels = map[string]string{}
	}
	lb, err := json.Marshal(labels)
	if err != nil {
		return fmt.Errorf("store: device %q: labels: %w", id, err)
	}
	_, err = t.exec(
		`INSERT INTO devices (id, token_hash, labels, created_at) VALUES (?, ?, ?, ?)`,
		id, tokenHash, string(lb), now())
	if err != nil && uniqueViolated(err, "devices", "id") {
		return fmt.Errorf("store: device %q: %w", id, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("store: create device %q: %w", id, err)
	}
	return nil
}

// selectDevices reads devices with their pending token rotations; a
// WHERE or ORDER BY may follow.
const selectDevices = `SELECT d.id, d.token_hash, d.labels, d.created_at, d.last_seen, d.info, d.wire,
	r.grace_ns, r.requested_at, r.sent_at, r.error
	FROM devices d LEFT JOIN token_rotations r ON r.device_id = d.id`

func scanDevice(row rowScanner) (Device, error) {
	var (
		d                 Device
		labels            string
		created, lastSeen sql.NullString
		info              sql.NullString
		rot               nullRotation
	)
	if err := row.Scan(&d.ID, &d.TokenHash, &labels, &created, &lastSeen, &info, &d.Wire,
		&rot.grace, &rot.requested, &rot.sent, &rot.err); err != nil {
		return d, err
	}
	if err := json.Unmarshal([]byte(labels), &d.Labels); err != nil {
		return d, fmt.Errorf("device %q: labels: %w", d.ID, err)
	}
	d.CreatedAt, d.LastSeen = parseTime(created), parseTime(lastSeen)
	if info.Valid {
		d.Info = json.RawMessage(info.String)
	}
	d.Rotation = rot.value()
	return d, nil
}

// Device returns the device id, or ErrNotFound.
func (s *Store) Device(ctx context.Context, id string) (Device, error) {
	d, err := scanDevice(s.readRow(ctx, selectDevices+` WHERE d.id = ?`, id))
	return d, rowErr(err, "device %q", id)
}

// Devices lists every enrolled device, ordered by id.
func (s *Store) Devices(ctx context.Context) ([]Device, error) {
	rows, err := s.readRows(ctx, selectDevices+` ORDER BY d.id`)
	if err != nil {
		return nil, fmt.Errorf("store: list devices: %w", err)
	}
	out, err := collect(rows, scanDevice, nil)
	if err != nil {
		return nil, fmt.Errorf("store: list devices: %w", err)
	}
	return out, nil
}

// DeleteDevice revokes a device: its tokens stop working, and its
// certificates are revoked for good. Its command history is kept.
func (t *Tx) DeleteDevice(id string) error {
	res, err := t.exec(`DELETE FROM devices WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("store: delete device %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: device %q: %w", id, ErrNotFound)
	}
	return t.revokeCredentials(id)
}

// LinkedOver records the wire of the device's link.
func (t *Tx) LinkedOver(id, wire string) error {
	if _, err := t.exec(`UPDATE devices SET wire = ? WHERE id = ?`, wire, id); err != nil {
		return fmt.Errorf("store: device %q: record its wire: %w", id, err)
	}
	return nil
}

// SeeDevice records that the device was seen at at, with its latest
// system info when info is not nil.
func (t *Tx) SeeDevice(id string, info json.RawMessage, at time.Time) error {
	var err error
	if info != nil {
		_, err = t.exec(`UPDATE devices SET last_seen = ?, info = ? WHERE id = ?`, formatTime(at), string(info), id)
	} else {
		_, err = t.exec(`UPDATE devices SET last_seen = ? WHERE id = ?`, formatTime(at), id)
	}
	if err != nil {
		return fmt.Errorf("store: device %q: record last seen: %w", id, err)
	}
	return nil
}

// SetLastSeen records that the device was last seen at at, unless the
// store holds a later time.
func (t *Tx) SetLastSeen(id string, at time.Time) error {
	s := formatTime(at)
	_, err := t.exec(`UPDATE devices SET last_seen = ? WHERE id = ? AND (last_seen IS NULL OR last_seen < ?)`, s, id, s)
	if err != nil {
		return fmt.Errorf("store: device %q: record last seen: %w", id, err)
	}
	return nil
}
