// Package rollouts keeps the fleet's desired state in the store: the
// modules rollouts put on devices, by SHA-256, and the agent releases
// whose binaries are kept among them; each rollout with its
// current revision, state and open wave; its revisions, the history; and
// each selected device's state in it. The store reaches it by
// Tx.Rollouts and Store.Rollouts and hands it a sqlrow.Writer and a
// sqlrow.Reader. What the states mean is the server's rollouts part's
// (server/RATIONALE.md, "Rollouts").
package rollouts

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// Writes are a write's changes to modules and rollouts.
type Writes struct{ t sqlrow.Writer }

// WritesIn are the rollouts' writes in t.
func WritesIn(t sqlrow.Writer) Writes { return Writes{t} }

// Reads are the reads of modules and rollouts.
type Reads struct{ r sqlrow.Reader }

// ReadsOf are the rollouts' reads on r.
func ReadsOf(r sqlrow.Reader) Reads { return Reads{r} }

// Module is a module kept by digest.
type Module struct {
	SHA256 string
	// Tool is the name its manifest gives it.
	Tool string
	Size int64
	Body []byte
}

// Rollout is a rollout's row: where it is.
type Rollout struct {
	Name string
	// Revision is the revision devices are brought to; Latest the
	// newest applied (above Revision after a rollback).
	Revision, Latest int
	State            string
	// Wave is the last wave open, counted from 0.
	Wave int
	// StateSince is when the rollout entered its state.
	StateSince time.Time
	// Reason says why the rollout is in its state, when it stopped.
	Reason string
	// LeaderNode leads it in a cluster, under its lease at LeaderEpoch:
	// "" and 0 on a single node, or while no node leads it.
	LeaderNode  string
	LeaderEpoch int64
	UpdatedAt   time.Time
}

// Revision is one applied version of a rollout.
type Revision struct {
	Name     string
	Revision int
	// Spec is the rollout.Spec, as JSON, with digests for tools.
	Spec json.RawMessage
	// Tools are its modules by tool name.
	Tools map[string]string
	// Outcome is how it ended: "" while it is the desired one.
	Outcome   string
	CreatedBy string
	CreatedAt time.Time
}

// Device is a selected device's state in a rollout.
type Device struct {
	Name, DeviceID string
	// Revision is the revision the state is about; Applied the one the
	// device was last known to run (0: none).
	Revision, Applied int
	Wave              int
	State             string
	SessionID, Error  string
	UpdatedAt         time.Time
}

// PutModule keeps m, unless its digest is kept already.
func (w Writes) PutModule(m Module) error {
	_, err := w.t.Exec(`INSERT INTO modules (sha256, tool, size, body, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (sha256) DO NOTHING`, m.SHA256, m.Tool, m.Size, m.Body, sqlrow.Now())
	if err != nil {
		return fmt.Errorf("store: keep module %s: %w", m.SHA256, err)
	}
	return nil
}

// Module is the module kept as sha256, or ErrNotFound.
func (q Reads) Module(ctx context.Context, sha256 string) (Module, error) {
	m := Module{SHA256: sha256}
	err := q.r.ReadRow(ctx, `SELECT tool, size, body FROM modules WHERE sha256 = ?`, sha256).Scan(&m.Tool, &m.Size, &m.Body)
	return m, sqlrow.Err(err, "module %s", sha256)
}

// ModuleTool is the tool name of the module kept as sha256, or
// ErrNotFound: what a module is, without its bytes.
func (q Reads) ModuleTool(ctx context.Context, sha256 string) (string, error) {
	var tool string
	err := q.r.ReadRow(ctx, `SELECT tool FROM modules WHERE sha256 = ?`, sha256).Scan(&tool)
	return tool, sqlrow.Err(err, "module %s", sha256)
}

// AddRevision records rev as name's newest revision and makes it the one
// devices are brought to, from its first wave; the revision it replaces
// ends as superseded. It returns the revision's number.
func (w Writes) AddRevision(rev Revision, state string) (int, error) {
	tools, err := json.Marshal(rev.Tools)
	if err != nil {
		return 0, err
	}
	var latest int
	err = w.t.QueryRow(`SELECT latest FROM rollouts WHERE name = ?`, rev.Name).Scan(&latest)
	now := sqlrow.Now()
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = w.t.Exec(`INSERT INTO rollouts (name, revision, latest, state, wave, state_since, updated_at) VALUES (?, 1, 1, ?, 0, ?, ?)`,
			rev.Name, state, now, now)
	case err == nil:
		if _, err = w.t.Exec(`UPDATE rollout_revisions SET outcome = 'superseded' WHERE name = ? AND outcome = ''`, rev.Name); err == nil {
			_, err = w.t.Exec(`UPDATE rollouts SET revision = ?, latest = ?, state = ?, wave = 0, state_since = ?, reason = '', updated_at = ? WHERE name = ?`,
				latest+1, latest+1, state, now, now, rev.Name)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("store: rollout %s: new revision: %w", rev.Name, err)
	}
	_, err = w.t.Exec(`INSERT INTO rollout_revisions (name, revision, spec, tools, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		rev.Name, latest+1, string(rev.Spec), string(tools), rev.CreatedBy, now)
	if err != nil {
		return 0, fmt.Errorf("store: rollout %s: record revision %d: %w", rev.Name, latest+1, err)
	}
	return latest + 1, nil
}

// ErrMoved: a rollout that changed since it was read.
var ErrMoved = errors.New("the rollout changed meanwhile")

// SetRollout records where r is: its desired revision, its state and
// since when, its reason and its open wave; if it is still where from
// says (its revision, state and wave) and led by from's leader, else it
// fails with ErrMoved: a leader that another node has taken the lead
// from (it paused, say) moves nothing.
func (w Writes) SetRollout(r, from Rollout) error {
	res, err := w.t.Exec(`UPDATE rollouts SET revision = ?, state = ?, wave = ?, state_since = ?, reason = ?, updated_at = ?
		WHERE name = ? AND revision = ? AND state = ? AND wave = ? AND leader_node = ? AND leader_epoch = ?`,
		r.Revision, r.State, r.Wave, sqlrow.FormatTime(r.StateSince), r.Reason, sqlrow.Now(), r.Name, from.Revision, from.State, from.Wave,
		from.LeaderNode, from.LeaderEpoch)
	if err != nil {
		return fmt.Errorf("store: rollout %s: %w", r.Name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: rollout %s: %w", r.Name, ErrMoved)
	}
	return nil
}

// EndRevision records how name's revision rev ended.
func (w Writes) EndRevision(name string, rev int, outcome string) error {
	_, err := w.t.Exec(`UPDATE rollout_revisions SET outcome = ? WHERE name = ? AND revision = ?`, outcome, name, rev)
	if err != nil {
		return fmt.Errorf("store: rollout %s: revision %d: %w", name, rev, err)
	}
	return nil
}

// PutDevice records d.
func (w Writes) PutDevice(d Device) error {
	_, err := w.t.Exec(`INSERT INTO rollout_devices (name, device_id, revision, wave, state, applied, session_id, error, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name, device_id) DO UPDATE SET revision = excluded.revision, wave = excluded.wave, state = excluded.state,
			applied = excluded.applied, session_id = excluded.session_id, error = excluded.error, updated_at = excluded.updated_at`,
		d.Name, d.DeviceID, d.Revision, d.Wave, d.State, d.Applied, d.SessionID, d.Error, sqlrow.Now())
	if err != nil {
		return fmt.Errorf("store: rollout %s: device %s: %w", d.Name, d.DeviceID, err)
	}
	return nil
}

// DeleteDevice forgets device id in rollout name: it left the selector
// and no longer has the rollout's tools.
func (w Writes) DeleteDevice(name, id string) error {
	if _, err := w.t.Exec(`DELETE FROM rollout_devices WHERE name = ? AND device_id = ?`, name, id); err != nil {
		return fmt.Errorf("store: rollout %s: device %s: %w", name, id, err)
	}
	return nil
}

const selectRollouts = `SELECT name, revision, latest, state, wave, state_since, reason, leader_node, leader_epoch, updated_at FROM rollouts`

func scanRollout(row sqlrow.Row) (Rollout, error) {
	var r Rollout
	var opened, updated sql.NullString
	err := row.Scan(&r.Name, &r.Revision, &r.Latest, &r.State, &r.Wave, &opened, &r.Reason, &r.LeaderNode, &r.LeaderEpoch, &updated)
	r.StateSince, r.UpdatedAt = sqlrow.ParseTime(opened), sqlrow.ParseTime(updated)
	return r, err
}

// Get is rollout name, or ErrNotFound.
func (q Reads) Get(ctx context.Context, name string) (Rollout, error) {
	r, err := scanRollout(q.r.ReadRow(ctx, selectRollouts+` WHERE name = ?`, name))
	return r, sqlrow.Err(err, "rollout %s", name)
}

// List is every rollout, by name.
func (q Reads) List(ctx context.Context) ([]Rollout, error) {
	rows, err := q.r.ReadRows(ctx, selectRollouts+` ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("store: rollouts: %w", err)
	}
	out, err := sqlrow.Collect(rows, scanRollout, []Rollout{})
	if err != nil {
		return nil, fmt.Errorf("store: rollouts: %w", err)
	}
	return out, nil
}

const selectRevisions = `SELECT name, revision, spec, tools, outcome, created_by, created_at FROM rollout_revisions`

func scanRevision(row sqlrow.Row) (Revision, error) {
	var r Revision
	var spec, tools string
	var created sql.NullString
	if err := row.Scan(&r.Name, &r.Revision, &spec, &tools, &r.Outcome, &r.CreatedBy, &created); err != nil {
		return r, err
	}
	r.Spec, r.CreatedAt = json.RawMessage(spec), sqlrow.ParseTime(created)
	return r, json.Unmarshal([]byte(tools), &r.Tools)
}

// Revision is revision rev of rollout name, or ErrNotFound.
func (q Reads) Revision(ctx context.Context, name string, rev int) (Revision, error) {
	r, err := scanRevision(q.r.ReadRow(ctx, selectRevisions+` WHERE name = ? AND revision = ?`, name, rev))
	return r, sqlrow.Err(err, "rollout %s revision %d", name, rev)
}

// Revisions are rollout name's revisions, newest first: its history.
func (q Reads) Revisions(ctx context.Context, name string) ([]Revision, error) {
	rows, err := q.r.ReadRows(ctx, selectRevisions+` WHERE name = ? ORDER BY revision DESC`, name)
	if err != nil {
		return nil, fmt.Errorf("store: rollout %s: revisions: %w", name, err)
	}
	out, err := sqlrow.Collect(rows, scanRevision, []Revision{})
	if err != nil {
		return nil, fmt.Errorf("store: rollout %s: revisions: %w", name, err)
	}
	return out, nil
}

const selectDevices = `SELECT name, device_id, revision, wave, state, applied, session_id, error, updated_at FROM rollout_devices`

func scanDevice(row sqlrow.Row) (Device, error) {
	var d Device
	var updated sql.NullString
	err := row.Scan(&d.Name, &d.DeviceID, &d.Revision, &d.Wave, &d.State, &d.Applied, &d.SessionID, &d.Error, &updated)
	d.UpdatedAt = sqlrow.ParseTime(updated)
	return d, err
}

// Devices are rollout name's devices, by wave then id.
func (q Reads) Devices(ctx context.Context, name string) ([]Device, error) {
	return q.devices(ctx, selectDevices+` WHERE name = ? ORDER BY wave, device_id`, name)
}

// OfDevice are the rollouts device id is in, by rollout name.
func (q Reads) OfDevice(ctx context.Context, id string) ([]Device, error) {
	return q.devices(ctx, selectDevices+` WHERE device_id = ? ORDER BY name`, id)
}

func (q Reads) devices(ctx context.Context, query string, arg string) ([]Device, error) {
	rows, err := q.r.ReadRows(ctx, query, arg)
	if err != nil {
		return nil, fmt.Errorf("store: rollout devices of %s: %w", arg, err)
	}
	out, err := sqlrow.Collect(rows, scanDevice, []Device{})
	if err != nil {
		return nil, fmt.Errorf("store: rollout devices of %s: %w", arg, err)
	}
	return out, nil
}
