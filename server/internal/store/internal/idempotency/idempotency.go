// Package idempotency keeps the Idempotency-Keys of API requests: a key
// is recorded with the session its request started, so that a repeat is
// recognised and another request under the same key refused.
package idempotency

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/dberr"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// ErrKeyTaken: an idempotency key that another request has already
// recorded.
var ErrKeyTaken = errors.New("idempotency key already recorded")

// Key is a request's Idempotency-Key as the session it started records
// it: who sent it, the key, and the request's fingerprint.
type Key struct {
	// Identity is who sent it: a key is theirs alone.
	Identity    string
	Key         string
	Fingerprint string
	// SessionID is the session it started.
	SessionID string
	// Response is the answer the request got, if it was known when the
	// session was recorded (a dispatch's, a fleet's); else the session's
	// result is the answer (a command's).
	Response  json.RawMessage
	CreatedAt time.Time
}

// Writes are a write's changes to the keys.
type Writes struct{ t sqlrow.Writer }

// WritesIn are the changes of the write whose transaction is t.
func WritesIn(t sqlrow.Writer) Writes { return Writes{t} }

// Insert records k for session sessionID; a key its identity has already
// recorded fails with ErrKeyTaken.
func (w Writes) Insert(k Key, sessionID string) error {
	_, err := w.t.Exec(
		`INSERT INTO idempotency_keys (identity, key, fingerprint, session_id, response, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		k.Identity, k.Key, k.Fingerprint, sessionID, sqlrow.NullString(string(k.Response)), sqlrow.Now())
	if err != nil && dberr.UniqueViolated(err, "idempotency_keys", "") {
		return fmt.Errorf("store: idempotency key %q of %s: %w", k.Key, k.Identity, ErrKeyTaken)
	}
	if err != nil {
		return fmt.Errorf("store: record idempotency key %q of %s: %w", k.Key, k.Identity, err)
	}
	return nil
}

// DeleteBefore forgets the keys recorded before t, and returns how many:
// a repeat under one of them is a new request.
func (w Writes) DeleteBefore(before time.Time) (int, error) {
	res, err := w.t.Exec(`DELETE FROM idempotency_keys WHERE created_at < ?`, sqlrow.FormatTime(before))
	if err != nil {
		return 0, fmt.Errorf("store: expire idempotency keys: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// Reads are the reads of the keys.
type Reads struct{ r sqlrow.Reader }

// ReadsOf are the reads of the keys through r.
func ReadsOf(r sqlrow.Reader) Reads { return Reads{r} }

// Get returns the key identity recorded, or sqlrow's not-found error.
func (q Reads) Get(ctx context.Context, identity, key string) (Key, error) {
	var (
		k        = Key{Identity: identity, Key: key}
		response sql.NullString
		created  sql.NullString
	)
	err := q.r.ReadRow(ctx, `SELECT fingerprint, session_id, response, created_at FROM idempotency_keys WHERE identity = ? AND key = ?`,
		identity, key).Scan(&k.Fingerprint, &k.SessionID, &response, &created)
	if response.Valid {
		k.Response = json.RawMessage(response.String)
	}
	k.CreatedAt = sqlrow.ParseTime(created)
	return k, sqlrow.Err(err, "idempotency key %q of %s", key, identity)
}
