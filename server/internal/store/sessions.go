package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/dberr"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// Session is one task run on one device, and once it ends its outcome.
type Session struct {
	ID       string
	TaskName string
	DeviceID string
	// RequesterKind and RequesterID say who asked: "operator" (the HTTP
	// API) or "constellation" with the client's id.
	RequesterKind string
	RequesterID   string
	// By is the operator identity, and token, that asked.
	By
	// Selector is, for a fleet, the device selector it ran with (its
	// labels, narrowed by its requester's scope), as JSON; empty for
	// others. A scoped reader sees a fleet whose selector implies its own.
	Selector string
	// Kind is "plan", "command" (a single command from the API) or
	// "fleet" (a plan for many devices, run by child sessions).
	Kind string
	// ParentID is the fleet a plan session runs for, or empty.
	ParentID   string
	State      string
	Plan       json.RawMessage
	Result     json.RawMessage
	Error      string
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	// Key, if set, is the idempotency key of the request that asked for
	// the session: SessionWrites.Insert records it with the session, so that a
	// repeat finds the session, and fails with ErrKeyTaken, recording
	// nothing, if the key is recorded already. Reads leave it nil.
	Key *IdempotencyKey

	// OriginalTaskName is the name the client sent when TaskName is its
	// sanitized form; empty otherwise.
	OriginalTaskName string
	// Owner is the node that runs it; a single node's sessions have the
	// zero Owner.
	Owner Owner
	// Fleet is, for a fleet, what it runs on, as JSON (its devices in
	// order, its concurrency and abort threshold): what a node that
	// adopts it needs. Listings leave it empty.
	Fleet json.RawMessage
}

// Owner is a node that runs sessions, at one fencing epoch: a node that
// starts again has a new epoch, and one whose sessions were adopted
// while it was cut off finds its epoch stale on the next write
// (SessionWrites.Fence, SessionWrites.End) and stops running them.
type Owner struct {
	Node  string
	Epoch int64
}

func (o Owner) String() string { return fmt.Sprintf("node %q (epoch %d)", o.Node, o.Epoch) }

// ErrAdopted: a write for a session another node has adopted.
var ErrAdopted = errors.New("session adopted by another node")

// unfinished is the SQL list of the states of a session that has not ended.
const unfinished = `('created', 'running')`

// Insert records a new session, and the idempotency key that
// asked for it, if any.
func (w SessionWrites) Insert(s Session) error {
	_, err := w.t.exec(
		`INSERT INTO sessions (id, task_name, original_task_name, device_id, requester_kind, requester_id, identity, token_id, selector, kind, parent_id, state, plan, created_at, started_at, owner_node, owner_epoch, fleet)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.TaskName, s.OriginalTaskName, s.DeviceID, s.RequesterKind, s.RequesterID, s.Identity, s.TokenID, s.Selector, s.Kind, s.ParentID, s.State,
		sqlrow.NullString(string(s.Plan)), sqlrow.FormatTime(s.CreatedAt), sqlrow.NullTime(s.StartedAt), s.Owner.Node, s.Owner.Epoch, sqlrow.NullString(string(s.Fleet)))
	if err != nil && dberr.UniqueViolated(err, "sessions", "id") {
		return fmt.Errorf("store: session %q: %w", s.ID, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("store: record session %q: %w", s.ID, err)
	}
	if s.Key != nil {
		return w.t.IdempotencyKeys().Insert(*s.Key, s.ID)
	}
	return nil
}

// Start moves a created session to running.
func (w SessionWrites) Start(id string) error {
	_, err := w.t.exec(`UPDATE sessions SET state = 'running', started_at = ? WHERE id = ? AND state = 'created'`, sqlrow.Now(), id)
	if err != nil {
		return fmt.Errorf("store: start session %q: %w", id, err)
	}
	return nil
}

// End records how session s ended: its State, Result and Error. A
// session that has already ended keeps its first outcome, and one that
// another Owner than s's runs now (it adopted it) is left to that owner.
// A session not recorded yet (a single command that never recorded its
// command) is recorded as it ends, with all of s.
func (w SessionWrites) End(s Session) error {
	_, err := w.t.exec(
		`INSERT INTO sessions (id, task_name, original_task_name, device_id, requester_kind, requester_id, identity, token_id, selector, kind, parent_id, state, plan, result, error, created_at, started_at, finished_at, owner_node, owner_epoch)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		 ON CONFLICT (id) DO UPDATE SET state = excluded.state, result = excluded.result, error = excluded.error, finished_at = excluded.finished_at
		 WHERE sessions.state IN `+unfinished+` AND sessions.owner_node = excluded.owner_node AND sessions.owner_epoch = excluded.owner_epoch`,
		s.ID, s.TaskName, s.OriginalTaskName, s.DeviceID, s.RequesterKind, s.RequesterID, s.Identity, s.TokenID, s.Selector, s.Kind, s.ParentID, s.State,
		sqlrow.NullString(string(s.Plan)), sqlrow.NullString(string(s.Result)), s.Error, sqlrow.FormatTime(s.CreatedAt), sqlrow.NullTime(s.StartedAt), sqlrow.Now(),
		s.Owner.Node, s.Owner.Epoch)
	if err != nil {
		return fmt.Errorf("store: end session %q: %w", s.ID, err)
	}
	return nil
}

// EndRecorded is SessionWrites.End for a session whose row is recorded,
// as a single command's is once its command is: one update of its
// outcome, binding none of the rest of the row.
func (w SessionWrites) EndRecorded(s Session) error {
	_, err := w.t.exec(
		`UPDATE sessions SET state = ?, result = ?, error = ?, finished_at = ? WHERE id = ? AND state IN `+unfinished,
		s.State, sqlrow.NullString(string(s.Result)), s.Error, sqlrow.Now(), s.ID)
	if err != nil {
		return fmt.Errorf("store: end session %q: %w", s.ID, err)
	}
	return nil
}

// Delete removes a session and its commands. The audit log keeps
// its entries.
func (w SessionWrites) Delete(id string) error {
	res, err := w.t.exec(`DELETE FROM sessions WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("store: delete session %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: session %q: %w", id, ErrNotFound)
	}
	if _, err := w.t.exec(`DELETE FROM commands WHERE session_id = ?`, id); err != nil {
		return fmt.Errorf("store: delete commands of session %q: %w", id, err)
	}
	return nil
}

// DeleteFinishedBefore removes the sessions that ended before t,
// with their commands, and returns how many.
//
// A session ends after it is created, so those are among the sessions
// created before t, which the index by creation time finds: no index by
// end is written when each session ends. What else it reads are the
// sessions created before t that had not ended by then, few once
// expiry has run. (A session whose end a clock step or another node's
// clock put before its creation goes once t passes its creation.)
func (w SessionWrites) DeleteFinishedBefore(before time.Time) (int, error) {
	cutoff := sqlrow.FormatTime(before)
	if _, err := w.t.exec(
		`DELETE FROM commands WHERE session_id IN (SELECT id FROM sessions WHERE `+finishedBefore+`)`,
		cutoff, cutoff); err != nil {
		return 0, fmt.Errorf("store: expire commands: %w", err)
	}
	res, err := w.t.exec(`DELETE FROM sessions WHERE `+finishedBefore, cutoff, cutoff)
	if err != nil {
		return 0, fmt.Errorf("store: expire sessions: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// finishedBefore picks the sessions that ended before its two arguments,
// the same time, by the index of their creation times.
const finishedBefore = `created_at < ? AND finished_at IS NOT NULL AND finished_at < ?`

// interruptedCommands are the pending commands of sessions no node owns.
// The status is a literal, which lets the query use the index of pending
// commands alone; each command's session is then found by its key, where
// NOT IN would read every session a node owns, each time a single node
// starts: all of them, on a store a cluster ran.
const interruptedCommands = `SELECT response_id FROM commands WHERE status = '` + CommandPending + `'
	AND NOT EXISTS (SELECT 1 FROM sessions WHERE sessions.id = commands.session_id AND sessions.owner_node <> '')`

// FailInterrupted fails what a stopped single node left unfinished: its
// sessions not yet ended and commands still waiting for results. A
// single node's sessions belong to no node: those a node of a cluster
// runs on the same store are left to the cluster, which adopts them when
// their node dies. Results that arrive for those commands later are
// still recorded, once.
func (w SessionWrites) FailInterrupted(reason string) (sessions, commands int, err error) {
	res, err := w.t.exec(
		`UPDATE sessions SET state = 'failed', error = ?, finished_at = ? WHERE state IN `+unfinished+` AND owner_node = ''`, reason, sqlrow.Now())
	if err != nil {
		return 0, 0, fmt.Errorf("store: fail interrupted sessions: %w", err)
	}
	ns, _ := res.RowsAffected()
	var pending []string
	rows, err := w.t.query(interruptedCommands)
	if err != nil {
		return 0, 0, fmt.Errorf("store: find interrupted commands: %w", err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, 0, fmt.Errorf("store: find interrupted commands: %w", err)
		}
		pending = append(pending, id)
	}
	rows.Close()
	for _, id := range pending {
		if _, err := w.t.Commands().Fail(id, reason); err != nil {
			return 0, 0, err
		}
	}
	return int(ns), len(pending), nil
}

const sessionColumns = `id, task_name, original_task_name, device_id, requester_kind, requester_id, identity, token_id, selector, kind, parent_id, state, plan, result, error, created_at, started_at, finished_at, owner_node, owner_epoch, fleet`

func scanSession(row rowScanner) (Session, error) {
	var (
		s                          Session
		plan, result, errText      sql.NullString
		fleet                      sql.NullString
		created, started, finished sql.NullString
	)
	err := row.Scan(&s.ID, &s.TaskName, &s.OriginalTaskName, &s.DeviceID, &s.RequesterKind, &s.RequesterID, &s.Identity, &s.TokenID, &s.Selector, &s.Kind, &s.ParentID, &s.State,
		&plan, &result, &errText, &created, &started, &finished, &s.Owner.Node, &s.Owner.Epoch, &fleet)
	if err != nil {
		return s, err
	}
	if plan.Valid {
		s.Plan = json.RawMessage(plan.String)
	}
	if result.Valid {
		s.Result = json.RawMessage(result.String)
	}
	if fleet.Valid {
		s.Fleet = json.RawMessage(fleet.String)
	}
	s.Error = errText.String
	s.CreatedAt, s.StartedAt, s.FinishedAt = sqlrow.ParseTime(created), sqlrow.ParseTime(started), sqlrow.ParseTime(finished)
	return s, nil
}

// Get returns one session, or ErrNotFound.
func (r SessionReads) Get(ctx context.Context, id string) (Session, error) {
	ses, err := scanSession(r.s.readRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id))
	return ses, sqlrow.Err(err, "session %q", id)
}

// Children lists the sessions of fleet parentID's devices, oldest
// first.
func (r SessionReads) Children(ctx context.Context, parentID string) ([]Session, error) {
	rows, err := r.s.readRows(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE parent_id = ? ORDER BY created_at, id`, parentID)
	if err != nil {
		return nil, fmt.Errorf("store: tasks of fleet %q: %w", parentID, err)
	}
	out, err := sqlrow.Collect(rows, scanSession, []Session{})
	if err != nil {
		return nil, fmt.Errorf("store: tasks of fleet %q: %w", parentID, err)
	}
	return out, nil
}

// named picks the sessions named ?, by the index of the named ones (a
// single command's session has no name): it finds none for "".
const named = `task_name = ? AND task_name <> ''`

// ByTask returns the newest session named taskName, or ErrNotFound.
// A fleet's children share its name; the fleet is the task of that name.
func (r SessionReads) ByTask(ctx context.Context, taskName string) (Session, error) {
	ses, err := scanSession(r.s.readRow(ctx,
		`SELECT `+sessionColumns+` FROM sessions WHERE `+named+` AND parent_id = '' ORDER BY created_at DESC LIMIT 1`, taskName))
	return ses, sqlrow.Err(err, "task %q", taskName)
}

// SessionKey is where a session sorts in a listing, newest first: by its
// creation time, then by its id.
type SessionKey struct {
	CreatedAt time.Time
	ID        string
}

// SessionFilter picks the sessions a listing holds: each non-empty field
// must match, Limit bounds how many, and After, if set, starts the listing
// after that key.
type SessionFilter struct {
	State    string
	TaskName string
	// OnlyDevices, if not nil, keeps the sessions on these devices, and
	// the fleets (which run on none): what a scoped reader may see, once
	// it has checked the fleets.
	OnlyDevices []string
	// RequesterKind and Identity, if set, keep the sessions that kind of
	// requester asked for under that identity: an MCP client's own tasks.
	RequesterKind, Identity string
	// TopLevel leaves out the sessions a fleet runs on its devices.
	TopLevel bool
	Limit    int
	After    *SessionKey
}

// summaryColumns are sessionColumns with plan, result and error left out:
// they read as empty.
const summaryColumns = `id, task_name, original_task_name, device_id, requester_kind, requester_id, identity, token_id, selector, kind, parent_id, state, NULL, NULL, NULL, created_at, started_at, finished_at, owner_node, owner_epoch, NULL`

// Summaries lists the sessions f picks, newest first, without their
// plan, result and error: a listing's size does not grow with theirs.
func (r SessionReads) Summaries(ctx context.Context, f SessionFilter) ([]Session, error) {
	var where []string
	var args []any
	if f.State != "" {
		where, args = append(where, `state = ?`), append(args, f.State)
	}
	if f.TaskName != "" {
		where, args = append(where, named), append(args, f.TaskName)
	}
	if f.RequesterKind != "" {
		where, args = append(where, `requester_kind = ?`), append(args, f.RequesterKind)
	}
	if f.Identity != "" {
		where, args = append(where, `identity = ?`), append(args, f.Identity)
	}
	if f.TopLevel {
		where = append(where, `parent_id = ''`)
	}
	if f.OnlyDevices != nil {
		only, err := json.Marshal(f.OnlyDevices)
		if err != nil {
			return nil, fmt.Errorf("store: list sessions: %w", err)
		}
		where, args = append(where, `(device_id = '' OR device_id IN (`+r.s.dialect.jsonTexts()+`))`), append(args, string(only))
	}
	if f.After != nil {
		at := sqlrow.FormatTime(f.After.CreatedAt)
		where, args = append(where, `(created_at < ? OR (created_at = ? AND id < ?))`), append(args, at, at, f.After.ID)
	}
	q := `SELECT ` + summaryColumns + ` FROM sessions`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, ` AND `)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, f.Limit)
	rows, err := r.s.readRows(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list sessions: %w", err)
	}
	out, err := sqlrow.Collect(rows, scanSession, []Session{})
	if err != nil {
		return nil, fmt.Errorf("store: list sessions: %w", err)
	}
	return out, nil
}

// SessionWrites are a write's changes to sessions: inserting, starting, ending and deleting them, failing those a restart interrupted, and moving them between the nodes that own them.
// Reached by [Tx.Sessions]; they belong to the write's transaction.
type SessionWrites struct{ t *Tx }

// Sessions are this write's changes to what [SessionWrites] keep.
func (t *Tx) Sessions() SessionWrites { return SessionWrites{t} }

// SessionReads are the reads of sessions: one, a parent's children, a task's, summaries, and the owners of the unfinished ones.
// Reached by [Store.Sessions].
type SessionReads struct{ s *Store }

// Sessions are the reads of what [SessionReads] keep.
func (s *Store) Sessions() SessionReads { return SessionReads{s} }
