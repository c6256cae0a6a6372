// Package revokedtokens keeps the hashes of the tokens that were revoked,
// a device's or an operator identity's, with whose they were and when,
// so that a caller who presents one can be told it was revoked, and
// when. A hash reveals nothing of a token never issued: a caller with a
// wrong token learns no more than before. The store reaches it from the
// writes that revoke (devices, identities) and from Store.RevokedToken.
package revokedtokens

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// Kind is whose a revoked token was.
type Kind string

// The kinds of revoked tokens.
const (
	Device   Kind = "device"
	Identity Kind = "identity"
)

// Token is a revoked token: whose it was, the device's id or the
// identity's name, and when it was revoked.
type Token struct {
	Kind      Kind
	Owner     string
	RevokedAt time.Time
}

// Record keeps, as revoked now, the tokens of kind that query selects,
// each as its hash and owner: `SELECT hash, owner FROM … WHERE …`. It
// runs in the write that revokes them, before they are deleted; a token
// already recorded keeps its first time.
func Record(w sqlrow.Writer, kind Kind, query string, args ...any) error {
	q := `INSERT INTO revoked_tokens (hash, kind, owner, revoked_at) SELECT r.hash, ?, r.owner, ? FROM (` + query + `) r WHERE r.hash IS NOT NULL
		ON CONFLICT (hash) DO NOTHING`
	if _, err := w.Exec(q, append([]any{string(kind), sqlrow.Now()}, args...)...); err != nil {
		return fmt.Errorf("store: record revoked %s tokens: %w", kind, err)
	}
	return nil
}

// Find is the revoked token whose hash is hash, or sqlrow.ErrNotFound.
func Find(ctx context.Context, r sqlrow.Reader, hash string) (Token, error) {
	var (
		t    Token
		kind string
		at   sql.NullString
	)
	err := r.ReadRow(ctx, `SELECT kind, owner, revoked_at FROM revoked_tokens WHERE hash = ?`, hash).Scan(&kind, &t.Owner, &at)
	t.Kind, t.RevokedAt = Kind(kind), sqlrow.ParseTime(at)
	return t, sqlrow.Err(err, "revoked token")
}
