// Package devices keeps the enrolled devices in the store: each with its
// labels (and their index, device_labels, which selectors read), what its
// links report (last seen, system info, wire) and its credentials: the
// hash of its token, a rotation of it in flight, the tokens a rotation
// retired while their grace lasts, and its certificates. The store
// reaches it by Tx.Devices and Store.Devices and hands it a sqlrow.Writer
// and a Reader.
package devices

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/access"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/dberr"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/revokedtokens"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/selectorsql"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
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

// Create enrolls a device. It fails with sqlrow.ErrExists if the id is taken.
func (w Writes) Create(id, tokenHash string, labels map[string]string) error {
	if labels == nil {
		labels = map[string]string{}
	}
	lb, err := json.Marshal(labels)
	if err != nil {
		return fmt.Errorf("store: device %q: labels: %w", id, err)
	}
	_, err = w.t.Exec(
		`INSERT INTO devices (id, token_hash, labels, created_at) VALUES (?, ?, ?, ?)`,
		id, tokenHash, string(lb), sqlrow.Now())
	if err != nil && dberr.UniqueViolated(err, "devices", "id") {
		return fmt.Errorf("store: device %q: %w", id, sqlrow.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("store: create device %q: %w", id, err)
	}
	if err := w.putLabels(id, labels); err != nil {
		return fmt.Errorf("store: create device %q: %w", id, err)
	}
	return nil
}

// putLabels indexes labels as device id's, after any it had.
func (w Writes) putLabels(id string, labels map[string]string) error {
	for k, v := range labels {
		if _, err := w.t.Exec(`INSERT INTO device_labels (device_id, key, value) VALUES (?, ?, ?)`, id, k, v); err != nil {
			return fmt.Errorf("label %q: %w", k, err)
		}
	}
	return nil
}

// SetLabels makes labels device id's labels, or fails with sqlrow.ErrNotFound.
func (w Writes) SetLabels(id string, labels map[string]string) error {
	lb, err := json.Marshal(labels)
	if err != nil {
		return fmt.Errorf("store: device %q: labels: %w", id, err)
	}
	res, err := w.t.Exec(`UPDATE devices SET labels = ? WHERE id = ?`, string(lb), id)
	if err := oneRow(res, err, "device %q: labels", id); err != nil {
		return err
	}
	if _, err = w.t.Exec(`DELETE FROM device_labels WHERE device_id = ?`, id); err == nil {
		err = w.putLabels(id, labels)
	}
	if err != nil {
		return fmt.Errorf("store: device %q: labels: %w", id, err)
	}
	return nil
}

// selectDevices reads devices with their pending token rotations; a
// WHERE or ORDER BY may follow.
const selectDevices = `SELECT d.id, d.token_hash, d.labels, d.created_at, d.last_seen, d.info, d.wire,
	r.grace_ns, r.requested_at, r.sent_at, r.error
	FROM devices d LEFT JOIN token_rotations r ON r.device_id = d.id`

func scanDevice(row sqlrow.Row) (Device, error) {
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
	d.CreatedAt, d.LastSeen = sqlrow.ParseTime(created), sqlrow.ParseTime(lastSeen)
	if info.Valid {
		d.Info = json.RawMessage(info.String)
	}
	d.Rotation = rot.value()
	return d, nil
}

// Get returns the device id, or sqlrow.ErrNotFound.
func (q Reads) Get(ctx context.Context, id string) (Device, error) {
	d, err := scanDevice(q.r.ReadRow(ctx, selectDevices+` WHERE d.id = ?`, id))
	return d, sqlrow.Err(err, "device %q", id)
}

// All lists every enrolled device, ordered by id.
func (q Reads) All(ctx context.Context) ([]Device, error) {
	rows, err := q.r.ReadRows(ctx, selectDevices+` ORDER BY d.id`)
	if err != nil {
		return nil, fmt.Errorf("store: list devices: %w", err)
	}
	out, err := sqlrow.Collect(rows, scanDevice, nil)
	if err != nil {
		return nil, fmt.Errorf("store: list devices: %w", err)
	}
	return out, nil
}

// Matching lists, sorted, the ids of the enrolled devices sel
// picks (an empty list, not nil, if none), from the label index: what it reads grows with the devices that
// have sel's first label, not with the fleet (a sel of only != reads
// every device's id). limit > 0 reads at most limit of them.
func (q Reads) Matching(ctx context.Context, sel access.Selector, limit int) ([]string, error) {
	query, args := selectorsql.Matching(sel, limit)
	rows, err := q.r.ReadRowsUnprepared(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: devices %s: %w", sel, err)
	}
	ids, err := sqlrow.Collect(rows, func(r sqlrow.Row) (id string, err error) { return id, r.Scan(&id) }, []string{})
	if err != nil {
		return nil, fmt.Errorf("store: devices %s: %w", sel, err)
	}
	slices.Sort(ids) // in Go: a PostgreSQL collation may order text otherwise
	return ids, nil
}

// Delete revokes a device: its tokens stop working, and its
// certificates are revoked for good. Its command history is kept.
func (w Writes) Delete(id string) error {
	err := revokedtokens.Record(w.t, revokedtokens.Device, `SELECT token_hash AS hash, id AS owner FROM devices WHERE id = ?
		UNION ALL SELECT sent_hash, device_id FROM token_rotations WHERE device_id = ?
		UNION ALL SELECT hash, device_id FROM retired_tokens WHERE device_id = ?`, id, id, id)
	if err != nil {
		return fmt.Errorf("store: delete device %q: %w", id, err)
	}
	res, err := w.t.Exec(`DELETE FROM devices WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("store: delete device %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: device %q: %w", id, sqlrow.ErrNotFound)
	}
	return w.revokeCredentials(id)
}

// LinkedOver records the wire of the device's link.
func (w Writes) LinkedOver(id, wire string) error {
	if _, err := w.t.Exec(`UPDATE devices SET wire = ? WHERE id = ?`, wire, id); err != nil {
		return fmt.Errorf("store: device %q: record its wire: %w", id, err)
	}
	return nil
}

// See records that the device was seen at at, with its latest
// system info when info is not nil.
func (w Writes) See(id string, info json.RawMessage, at time.Time) error {
	var err error
	if info != nil {
		_, err = w.t.Exec(`UPDATE devices SET last_seen = ?, info = ? WHERE id = ?`, sqlrow.FormatTime(at), string(info), id)
	} else {
		_, err = w.t.Exec(`UPDATE devices SET last_seen = ? WHERE id = ?`, sqlrow.FormatTime(at), id)
	}
	if err != nil {
		return fmt.Errorf("store: device %q: record last seen: %w", id, err)
	}
	return nil
}

// SetLastSeen records that the device was last seen at at, unless the
// store holds a later time.
func (w Writes) SetLastSeen(id string, at time.Time) error {
	s := sqlrow.FormatTime(at)
	_, err := w.t.Exec(`UPDATE devices SET last_seen = ? WHERE id = ? AND (last_seen IS NULL OR last_seen < ?)`, s, id, s)
	if err != nil {
		return fmt.Errorf("store: device %q: record last seen: %w", id, err)
	}
	return nil
}

// Writes are a write's changes to enrolled devices and their
// credentials: enrolment, deletion, what a link reports, token rotation
// and certificates.
type Writes struct{ t sqlrow.Writer }

// WritesIn are the devices' writes in t.
func WritesIn(t sqlrow.Writer) Writes { return Writes{t} }

// Reader is a sqlrow.Reader that also runs a query without keeping it
// prepared: Matching's text changes with the selector, and would fill
// the cache of prepared statements with queries run once.
type Reader interface {
	sqlrow.Reader
	// ReadRowsUnprepared runs a query on the store's readers without
	// preparing it.
	ReadRowsUnprepared(ctx context.Context, query string, args ...any) (sqlrow.Rows, error)
}

// Reads are the reads of enrolled devices and their credentials.
type Reads struct{ r Reader }

// ReadsOf are the devices' reads on r.
func ReadsOf(r Reader) Reads { return Reads{r} }
