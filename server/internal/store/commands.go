package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Command states.
const (
	CommandPending = "pending"
	CommandDone    = "done"
)

// Command is one COMMAND message and, once it ends, its results.
type Command struct {
	ResponseID string
	DeviceID   string
	SessionID  string
	Actions    json.RawMessage
	Status     string
	Results    json.RawMessage
	Error      string
	CreatedAt  time.Time
	FinishedAt time.Time
}

// InsertCommand records a command before it is sent, so that no command
// runs unrecorded.
func (s *Store) InsertCommand(ctx context.Context, c Command) error {
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO commands (response_id, device_id, session_id, actions, status, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		c.ResponseID, c.DeviceID, c.SessionID, string(c.Actions), CommandPending, now())
	if err != nil {
		return fmt.Errorf("store: record command %s: %w", c.ResponseID, err)
	}
	return nil
}

// FinishCommand records the results of a command.
func (s *Store) FinishCommand(ctx context.Context, responseID string, results json.RawMessage, errText string) error {
	_, err := s.db.ExecContext(ctx,
		`UPDATE commands SET status = ?, results = ?, error = ?, finished_at = ? WHERE response_id = ?`,
		CommandDone, string(results), errText, now(), responseID)
	if err != nil {
		return fmt.Errorf("store: record results of %s: %w", responseID, err)
	}
	return nil
}

// Command returns one command, or ErrNotFound.
func (s *Store) Command(ctx context.Context, responseID string) (Command, error) {
	var (
		c                 Command
		actions           string
		results, errText  sql.NullString
		created, finished sql.NullString
	)
	err := s.db.QueryRowContext(ctx,
		`SELECT response_id, device_id, session_id, actions, status, results, error, created_at, finished_at FROM commands WHERE response_id = ?`,
		responseID).Scan(&c.ResponseID, &c.DeviceID, &c.SessionID, &actions, &c.Status, &results, &errText, &created, &finished)
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("store: command %s: %w", responseID, ErrNotFound)
	}
	if err != nil {
		return c, fmt.Errorf("store: command %s: %w", responseID, err)
	}
	c.Actions = json.RawMessage(actions)
	if results.Valid {
		c.Results = json.RawMessage(results.String)
	}
	c.Error = errText.String
	c.CreatedAt, c.FinishedAt = parseTime(created), parseTime(finished)
	return c, nil
}
