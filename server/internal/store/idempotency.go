package store

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

// IdempotencyKey is a request's Idempotency-Key as the session it started
// records it: who sent it, the key, and the request's fingerprint, so that
// a repeat is recognised and another request under the same key refused.
type IdempotencyKey struct {
	// Identity is who sent it: a key is theirs alone.
	Identity    string
	Key         string
	Fingerprint string
	// SessionID is the session it started, as SessionWrites.Insert recorded it.
	SessionID string
	// Response is the answer the request got, if it was known when the
	// session was recorded (a dispatch's, a fleet's); else the session's
	// result is the answer (a command's).
	Response  json.RawMessage
	CreatedAt time.Time
}

// insertIdempotencyKey records k for session sessionID; a key its
// identity has already recorded fails with ErrKeyTaken.
func (t *Tx) insertIdempotencyKey(k IdempotencyKey, sessionID string) error {
	_, err := t.exec(
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

// Get returns the key identity recorded, or ErrNotFound.
func (q IdempotencyKeyReads) Get(ctx context.Context, identity, key string) (IdempotencyKey, error) {
	var (
		k        = IdempotencyKey{Identity: identity, Key: key}
		response sql.NullString
		created  sql.NullString
	)
	err := q.s.readRow(ctx, `SELECT fingerprint, session_id, response, created_at FROM idempotency_keys WHERE identity = ? AND key = ?`,
		identity, key).Scan(&k.Fingerprint, &k.SessionID, &response, &created)
	if response.Valid {
		k.Response = json.RawMessage(response.String)
	}
	k.CreatedAt = sqlrow.ParseTime(created)
	return k, sqlrow.Err(err, "idempotency key %q of %s", key, identity)
}

// DeleteBefore forgets the keys recorded before t, and
// returns how many: a repeat under one of them is a new request.
func (w IdempotencyKeyWrites) DeleteBefore(before time.Time) (int, error) {
	res, err := w.t.exec(`DELETE FROM idempotency_keys WHERE created_at < ?`, sqlrow.FormatTime(before))
	if err != nil {
		return 0, fmt.Errorf("store: expire idempotency keys: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// IdempotencyKeyWrites are a write's changes to the idempotency keys of API requests (a key is inserted with the session it started: see SessionWrites.Insert).
// Reached by [Tx.IdempotencyKeys]; they belong to the write's transaction.
type IdempotencyKeyWrites struct{ t *Tx }

// IdempotencyKeys are this write's changes to what [IdempotencyKeyWrites] keep.
func (t *Tx) IdempotencyKeys() IdempotencyKeyWrites { return IdempotencyKeyWrites{t} }

// IdempotencyKeyReads are the reads of the idempotency keys of API requests.
// Reached by [Store.IdempotencyKeys].
type IdempotencyKeyReads struct{ s *Store }

// IdempotencyKeys are the reads of what [IdempotencyKeyReads] keep.
func (s *Store) IdempotencyKeys() IdempotencyKeyReads { return IdempotencyKeyReads{s} }
