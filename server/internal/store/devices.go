package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
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
	if err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed: devices.id") {
		return fmt.Errorf("store: device %q: %w", id, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("store: create device %q: %w", id, err)
	}
	return nil
}

const deviceColumns = `id, token_hash, labels, created_at, last_seen, info`

func scanDevice(row rowScanner) (Device, error) {
	var (
		d                 Device
		labels            string
		created, lastSeen sql.NullString
		info              sql.NullString
	)
	if err := row.Scan(&d.ID, &d.TokenHash, &labels, &created, &lastSeen, &info); err != nil {
		return d, err
	}
	if err := json.Unmarshal([]byte(labels), &d.Labels); err != nil {
		return d, fmt.Errorf("device %q: labels: %w", d.ID, err)
	}
	d.CreatedAt, d.LastSeen = parseTime(created), parseTime(lastSeen)
	if info.Valid {
		d.Info = json.RawMessage(info.String)
	}
	return d, nil
}

// Device returns the device id, or ErrNotFound.
func (s *Store) Device(ctx context.Context, id string) (Device, error) {
	d, err := scanDevice(s.readRow(ctx, `SELECT `+deviceColumns+` FROM devices WHERE id = ?`, id))
	return d, rowErr(err, "device %q", id)
}

// DeviceByTokenHash returns the device whose token hashes to hash, or
// ErrNotFound.
func (s *Store) DeviceByTokenHash(ctx context.Context, hash string) (Device, error) {
	d, err := scanDevice(s.readRow(ctx, `SELECT `+deviceColumns+` FROM devices WHERE token_hash = ?`, hash))
	return d, rowErr(err, "device by token")
}

// Devices lists every enrolled device, ordered by id.
func (s *Store) Devices(ctx context.Context) ([]Device, error) {
	rows, err := s.readRows(ctx, `SELECT `+deviceColumns+` FROM devices ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: list devices: %w", err)
	}
	out, err := collect(rows, scanDevice, nil)
	if err != nil {
		return nil, fmt.Errorf("store: list devices: %w", err)
	}
	return out, nil
}

// DeleteDevice revokes a device: its token stops working. Its command
// history is kept.
func (t *Tx) DeleteDevice(id string) error {
	res, err := t.exec(`DELETE FROM devices WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("store: delete device %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: device %q: %w", id, ErrNotFound)
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
