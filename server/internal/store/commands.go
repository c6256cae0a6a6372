package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/protocol"

	"github.com/edgeaip/edgeaip/server/internal/encodedonce"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/audit"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// Command states.
const (
	// CommandPending: sent, or about to be, and waiting for results.
	CommandPending = "pending"
	// CommandDone: the device's results are recorded.
	CommandDone = "done"
	// CommandFailed: ended without the device's results (offline, timed
	// out, server restarted). Results that arrive later are still recorded
	// and turn it into done, late.
	CommandFailed = "failed"
)

// More errors callers can test with errors.Is.
var (
	// ErrWrongDevice: results for a command that went to another device.
	ErrWrongDevice = errors.New("command was sent to another device")
	// ErrDuplicate: results for a command whose results are recorded.
	ErrDuplicate = errors.New("results already recorded")
	// ErrFinished: a command that has already ended.
	ErrFinished = errors.New("command already ended")
)

// Command is one COMMAND message and, once it ends, its results.
type Command struct {
	ResponseID string
	DeviceID   string
	SessionID  string
	// Actor is who the command ran for, as the audit log names them:
	// "operator", or "constellation:ID".
	Actor string
	// By is the operator identity, and token, it ran for.
	By
	Step    int
	Attempt int
	Actions []protocol.Command
	// Tools describes each action's tool as the device's inventory had it
	// when the command was sent.
	Tools []ToolRef
	// Timeout is how long it waits for its results, and WaitForDevice
	// whether it waits for a device that is not online: what a node that
	// adopts its session needs to send it again.
	Timeout       time.Duration
	WaitForDevice bool
	Status        string
	Results       []protocol.Result
	Error         string
	// Late is set when the device's results arrived after the command had
	// failed, e.g. after its timeout or a server restart.
	Late       bool
	CreatedAt  time.Time
	FinishedAt time.Time
}

// ToolRef is what the audit log records about the tool of an action.
type ToolRef struct {
	Namespace string `json:"namespace,omitempty"`
	SHA256    string `json:"sha256,omitempty"`
}

// Insert records a command before it is sent, so that no command
// runs unrecorded.
func (w CommandWrites) Insert(c Command) error {
	actions, err := encodedonce.CommandsJSON(audit.Actions(c.Actions))
	if err != nil {
		return fmt.Errorf("store: command %s: actions: %w", c.ResponseID, err)
	}
	tools, err := json.Marshal(c.Tools)
	if err != nil {
		return fmt.Errorf("store: command %s: tools: %w", c.ResponseID, err)
	}
	_, err = w.t.exec(
		`INSERT INTO commands (response_id, device_id, session_id, actor, identity, token_id, step, attempt, actions, tools, timeout_ms, wait_for_device, status, created_at)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ResponseID, c.DeviceID, c.SessionID, c.Actor, c.Identity, c.TokenID, c.Step, c.Attempt, string(actions), string(tools),
		c.Timeout.Milliseconds(), c.WaitForDevice, CommandPending, sqlrow.Now())
	if err != nil {
		return fmt.Errorf("store: record command %s: %w", c.ResponseID, err)
	}
	return nil
}

// RecordResults records a device's results for a command, with their
// audit entries, exactly once: it fails with ErrNotFound for an unknown
// response_id, ErrWrongDevice if the command went to another device, and
// ErrDuplicate if its results are already recorded. A command that had
// failed accepts them as late. The results are matched to the actions by
// call_id, and the returned Command holds them in action order.
func (w CommandWrites) RecordResults(deviceID, responseID string, results []protocol.Result) (Command, error) {
	c, err := w.t.command(responseID)
	if err != nil {
		return c, err
	}
	switch {
	case c.DeviceID != deviceID:
		return c, fmt.Errorf("store: command %s: %w", responseID, ErrWrongDevice)
	case c.Status == CommandDone:
		return c, fmt.Errorf("store: command %s: %w", responseID, ErrDuplicate)
	}
	from := c.Status
	c.Late = c.Status == CommandFailed
	c.Status, c.Results = CommandDone, protocol.MatchResults(c.Actions, results)
	if _, err := w.t.finish(&c, from); err != nil {
		return c, err
	}
	return c, nil
}

// RecordSentResults is RecordResults for a command whose record the
// caller holds, sent, as CommandWrites.Insert was given it: while the command
// is pending, as it is when its results come in time, the results are
// recorded by one conditional update, without reading the row back; the
// returned Command is sent with its outcome (CreatedAt and FinishedAt
// left as they were). Otherwise (it failed meanwhile, went to another
// device, or has its results) it is RecordResults, with its errors.
func (w CommandWrites) RecordSentResults(sent Command, deviceID string, results []protocol.Result) (Command, error) {
	c := sent
	c.Status, c.Error, c.Late, c.Results = CommandDone, "", false, protocol.MatchResults(c.Actions, results)
	if deviceID == sent.DeviceID {
		done, err := w.t.finish(&c, CommandPending)
		if err != nil || done {
			return c, err
		}
	}
	return w.t.Commands().RecordResults(deviceID, sent.ResponseID, results)
}

// Fail ends a pending command without the device's results: every
// action gets a failure carrying errText. It fails with ErrFinished if the
// command has already ended, and then returns the command as recorded.
func (w CommandWrites) Fail(responseID, errText string) (Command, error) {
	c, err := w.t.command(responseID)
	if err != nil {
		return c, err
	}
	if c.Status != CommandPending {
		return c, fmt.Errorf("store: command %s: %w", responseID, ErrFinished)
	}
	c.Status, c.Error, c.Results = CommandFailed, errText, protocol.FailAll(protocol.CallIDs(c.Actions), errText)
	if _, err := w.t.finish(&c, CommandPending); err != nil {
		return c, err
	}
	return c, nil
}

// finish writes the command's outcome and appends its audit entries, if
// the command's status is still from; it reports whether it was, and so
// whether anything was written. On PostgreSQL that goes out with the
// rest of the batch, taken to be so (Tx.changesRow).
func (t *Tx) finish(c *Command, from string) (bool, error) {
	results, err := json.Marshal(c.Results)
	if err != nil {
		return false, fmt.Errorf("store: command %s: results: %w", c.ResponseID, err)
	}
	changed, err := t.changesRow(
		`UPDATE commands SET status = ?, results = ?, error = ?, late = ?, finished_at = COALESCE(finished_at, ?) WHERE response_id = ? AND status = ?`,
		c.Status, string(results), c.Error, c.Late, sqlrow.Now(), c.ResponseID, from)
	if err != nil {
		return false, fmt.Errorf("store: record results of %s: %w", c.ResponseID, err)
	}
	if !changed {
		return false, nil
	}
	return true, t.appendAudit(c)
}

const commandColumns = `response_id, device_id, session_id, actor, identity, token_id, step, attempt, actions, tools, timeout_ms, wait_for_device, status, results, error, late, created_at, finished_at`

func scanCommand(row rowScanner) (Command, error) {
	var (
		c                 Command
		actions, tools    string
		results, errText  sql.NullString
		created, finished sql.NullString
		timeoutMS         int64
	)
	err := row.Scan(&c.ResponseID, &c.DeviceID, &c.SessionID, &c.Actor, &c.Identity, &c.TokenID, &c.Step, &c.Attempt, &actions, &tools,
		&timeoutMS, &c.WaitForDevice, &c.Status, &results, &errText, &c.Late, &created, &finished)
	if err != nil {
		return c, err
	}
	c.Timeout = time.Duration(timeoutMS) * time.Millisecond
	if err := json.Unmarshal([]byte(actions), &c.Actions); err != nil {
		return c, fmt.Errorf("command %s: actions: %w", c.ResponseID, err)
	}
	if err := json.Unmarshal([]byte(tools), &c.Tools); err != nil {
		return c, fmt.Errorf("command %s: tools: %w", c.ResponseID, err)
	}
	if results.Valid {
		if err := json.Unmarshal([]byte(results.String), &c.Results); err != nil {
			return c, fmt.Errorf("command %s: results: %w", c.ResponseID, err)
		}
	}
	c.Error = errText.String
	c.CreatedAt, c.FinishedAt = sqlrow.ParseTime(created), sqlrow.ParseTime(finished)
	return c, nil
}

func (t *Tx) command(responseID string) (Command, error) {
	c, err := scanCommand(t.queryRow(`SELECT `+commandColumns+` FROM commands WHERE response_id = ?`, responseID))
	return c, sqlrow.Err(err, "command %s", responseID)
}

// Get returns one command, or ErrNotFound.
func (q CommandReads) Get(ctx context.Context, responseID string) (Command, error) {
	c, err := scanCommand(q.s.readRow(ctx, `SELECT `+commandColumns+` FROM commands WHERE response_id = ?`, responseID))
	return c, sqlrow.Err(err, "command %s", responseID)
}

// OfSession lists a session's commands in the order they were sent.
func (q CommandReads) OfSession(ctx context.Context, sessionID string) ([]Command, error) {
	rows, err := q.s.readRows(ctx,
		`SELECT `+commandColumns+` FROM commands WHERE session_id = ? ORDER BY created_at, step, attempt`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("store: commands of session %q: %w", sessionID, err)
	}
	out, err := sqlrow.Collect(rows, scanCommand, []Command{})
	if err != nil {
		return nil, fmt.Errorf("store: commands of session %q: %w", sessionID, err)
	}
	return out, nil
}

// CommandWrites are a write's changes to commands: inserting them, recording their results or their failure, and the local calls a device reports.
// Reached by [Tx.Commands]; they belong to the write's transaction.
type CommandWrites struct{ t *Tx }

// Commands are this write's changes to what [CommandWrites] keep.
func (t *Tx) Commands() CommandWrites { return CommandWrites{t} }

// CommandReads are the reads of commands and their results.
// Reached by [Store.Commands].
type CommandReads struct{ s *Store }

// Commands are the reads of what [CommandReads] keep.
func (s *Store) Commands() CommandReads { return CommandReads{s} }
