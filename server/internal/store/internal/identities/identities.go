// Package identities keeps the operators' identities in the store: each
// with a role and a scope, the tokens that act for it (by hash), and the
// dashboard's logins made with them. The store reaches it by
// Tx.Identities and Store.Identities and hands it a sqlrow.Writer and a
// sqlrow.Reader.
package identities

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/dberr"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/revokedtokens"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// Writes are a write's changes to identities, their tokens and their
// logins.
type Writes struct{ t sqlrow.Writer }

// WritesIn are the identities' writes in t.
func WritesIn(t sqlrow.Writer) Writes { return Writes{t} }

// Reads are the reads of identities, their tokens and their logins.
type Reads struct{ r sqlrow.Reader }

// ReadsOf are the identities' reads on r.
func ReadsOf(r sqlrow.Reader) Reads { return Reads{r} }

// Identity is an operator identity: a name, a role, a scope, and the
// tokens that act for it.
type Identity struct {
	Name string
	Role string
	// Devices is the device selector of its scope, Tools its tool
	// patterns; both empty: unscoped.
	Devices   string
	Tools     []string
	CreatedAt time.Time
	// Tokens are its live tokens, oldest first; filled by Identities and
	// Identity only.
	Tokens []Token
}

// Token is one of an identity's tokens. Only its hash is kept; its ID is
// public, for listings and the audit log.
type Token struct {
	ID        string
	Identity  string
	Hash      string
	CreatedAt time.Time
	// ExpiresAt is when it stops working; zero: when it is revoked.
	ExpiresAt time.Time
}

// By names who asked for a task, a command or an audit entry: the
// operator identity and the token it used. Rows from before identities
// name no one.
type By struct {
	Identity string
	TokenID  string
}

// ErrLastAdmin: a change that would leave no unscoped admin with a live
// token, and so nobody to manage identities.
var ErrLastAdmin = errors.New("it is the last unscoped admin")

// Create records a new identity with its first token; a name in
// use fails with sqlrow.ErrExists.
func (w Writes) Create(id Identity, tok Token) error {
	tools, err := json.Marshal(sqlrow.List(id.Tools))
	if err != nil {
		return fmt.Errorf("store: identity %q: tools: %w", id.Name, err)
	}
	_, err = w.t.Exec(`INSERT INTO identities (name, role, devices, tools, created_at) VALUES (?, ?, ?, ?, ?)`,
		id.Name, id.Role, id.Devices, string(tools), sqlrow.Now())
	if err != nil && dberr.UniqueViolated(err, "identities", "name") {
		return fmt.Errorf("store: identity %q: %w", id.Name, sqlrow.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("store: create identity %q: %w", id.Name, err)
	}
	tok.Identity = id.Name
	return w.AddToken(tok)
}

// AddToken gives tok.Identity another token; an identity that does not
// exist fails with sqlrow.ErrNotFound.
func (w Writes) AddToken(tok Token) error {
	var n int
	if err := w.t.QueryRow(`SELECT count(*) FROM identities WHERE name = ?`, tok.Identity).Scan(&n); err != nil {
		return fmt.Errorf("store: identity %q: %w", tok.Identity, err)
	}
	if n == 0 {
		return fmt.Errorf("store: identity %q: %w", tok.Identity, sqlrow.ErrNotFound)
	}
	_, err := w.t.Exec(`INSERT INTO identity_tokens (id, identity, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		tok.ID, tok.Identity, tok.Hash, sqlrow.Now(), sqlrow.NullTime(tok.ExpiresAt))
	if err != nil {
		return fmt.Errorf("store: identity %q: add token %s: %w", tok.Identity, tok.ID, err)
	}
	return nil
}

// Delete revokes an identity: its tokens and their logins go with
// it. It returns the ids of the tokens it had, and fails with sqlrow.ErrNotFound
// if there is no such identity, or ErrLastAdmin.
func (w Writes) Delete(name string) ([]string, error) {
	ids, err := w.tokenIDs(`SELECT id FROM identity_tokens WHERE identity = ?`, name)
	if err != nil {
		return nil, fmt.Errorf("store: revoke identity %q: %w", name, err)
	}
	err = revokedtokens.Record(w.t, revokedtokens.Identity, `SELECT hash, identity AS owner FROM identity_tokens WHERE identity = ?`, name)
	if err != nil {
		return nil, fmt.Errorf("store: revoke identity %q: %w", name, err)
	}
	if err := w.deleteKeepingAnAdmin(`DELETE FROM identities WHERE name = ?`, name); err != nil {
		return nil, fmt.Errorf("store: revoke identity %q: %w", name, err)
	}
	return ids, nil
}

// ExpireTokens makes every token of identity but keep stop working at at
// (at once if at is not in the future; a token due to expire sooner keeps
// its time), and returns their ids: a rotation. It fails with sqlrow.ErrNotFound
// if identity has no token keep.
func (w Writes) ExpireTokens(identity, keep string, at time.Time) ([]string, error) {
	var n int
	if err := w.t.QueryRow(`SELECT count(*) FROM identity_tokens WHERE identity = ? AND id = ?`, identity, keep).Scan(&n); err != nil {
		return nil, fmt.Errorf("store: identity %q: %w", identity, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("store: identity %q: token %s: %w", identity, keep, sqlrow.ErrNotFound)
	}
	ids, err := w.tokenIDs(`SELECT id FROM identity_tokens WHERE identity = ? AND id != ?`, identity, keep)
	if err != nil {
		return nil, fmt.Errorf("store: identity %q: %w", identity, err)
	}
	if !at.After(time.Now()) {
		_, err = w.t.Exec(`DELETE FROM identity_tokens WHERE identity = ? AND id != ?`, identity, keep)
	} else {
		_, err = w.t.Exec(`UPDATE identity_tokens SET expires_at = ? WHERE identity = ? AND id != ? AND (expires_at IS NULL OR expires_at > ?)`,
			sqlrow.FormatTime(at), identity, keep, sqlrow.FormatTime(at))
	}
	if err != nil {
		return nil, fmt.Errorf("store: identity %q: expire tokens: %w", identity, err)
	}
	return ids, nil
}

// DeleteToken revokes one token of identity, and its logins. It fails with
// sqlrow.ErrNotFound if identity has no such token, or with ErrLastAdmin.
func (w Writes) DeleteToken(identity, id string) error {
	err := revokedtokens.Record(w.t, revokedtokens.Identity, `SELECT hash, identity AS owner FROM identity_tokens WHERE identity = ? AND id = ?`, identity, id)
	if err != nil {
		return fmt.Errorf("store: identity %q: revoke token %s: %w", identity, id, err)
	}
	if err := w.deleteKeepingAnAdmin(`DELETE FROM identity_tokens WHERE identity = ? AND id = ?`, identity, id); err != nil {
		return fmt.Errorf("store: identity %q: revoke token %s: %w", identity, id, err)
	}
	return nil
}

// deleteKeepingAnAdmin runs a DELETE, which fails with sqlrow.ErrNotFound if it
// deletes nothing, or with ErrLastAdmin if it took the last unscoped
// admin token that does not expire: the caller's write is then rolled
// back, so that someone can still manage identities.
func (w Writes) deleteKeepingAnAdmin(query string, args ...any) error {
	before, err := w.adminTokens()
	if err != nil {
		return err
	}
	res, err := w.t.Exec(query, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return sqlrow.ErrNotFound
	}
	after, err := w.adminTokens()
	switch {
	case err != nil:
		return err
	case before > 0 && after == 0:
		return ErrLastAdmin
	}
	return nil
}

func (w Writes) adminTokens() (int, error) {
	var n int
	err := w.t.QueryRow(`SELECT count(*) FROM identities i JOIN identity_tokens k ON k.identity = i.name
		WHERE i.role = 'admin' AND i.devices = '' AND i.tools = '[]' AND k.expires_at IS NULL`).Scan(&n)
	return n, err
}

func (w Writes) tokenIDs(query string, args ...any) ([]string, error) {
	rows, err := w.t.Query(query, args...)
	if err != nil {
		return nil, err
	}
	return sqlrow.Collect(rows, func(r sqlrow.Row) (string, error) {
		var id string
		return id, r.Scan(&id)
	}, []string{})
}

// Count counts the identities, revoked ones not included.
func (w Writes) Count() (int, error) {
	var n int
	if err := w.t.QueryRow(`SELECT count(*) FROM identities`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: count identities: %w", err)
	}
	return n, nil
}

const identityColumns = `i.name, i.role, i.devices, i.tools, i.created_at`

func scanIdentity(row sqlrow.Row, more ...any) (Identity, error) {
	var (
		id      Identity
		tools   string
		created sql.NullString
	)
	if err := row.Scan(append([]any{&id.Name, &id.Role, &id.Devices, &tools, &created}, more...)...); err != nil {
		return id, err
	}
	if err := json.Unmarshal([]byte(tools), &id.Tools); err != nil {
		return id, fmt.Errorf("identity %q: tools: %w", id.Name, err)
	}
	if len(id.Tools) == 0 {
		id.Tools = nil
	}
	id.CreatedAt = sqlrow.ParseTime(created)
	return id, nil
}

// live is the SQL condition on a token k that it works at the time given
// as its one argument.
const live = `(k.expires_at IS NULL OR k.expires_at > ?)`

// TokenByHash returns the live token whose hash is hash, and its
// identity, or sqlrow.ErrNotFound.
func (q Reads) TokenByHash(ctx context.Context, hash string) (Identity, Token, error) {
	return q.tokenWhere(ctx, `FROM identity_tokens k JOIN identities i ON i.name = k.identity WHERE k.hash = ? AND `+live,
		hash, sqlrow.Now())
}

// Login returns the token, and its identity, that made the live login
// whose id hashes to hash, or sqlrow.ErrNotFound: a login ends when it expires
// or when its token does.
func (q Reads) Login(ctx context.Context, hash string) (Identity, Token, error) {
	at := sqlrow.Now()
	return q.tokenWhere(ctx, `FROM logins l JOIN identity_tokens k ON k.id = l.token_id JOIN identities i ON i.name = k.identity
		WHERE l.hash = ? AND l.expires_at > ? AND `+live, hash, at, at)
}

func (q Reads) tokenWhere(ctx context.Context, from string, args ...any) (Identity, Token, error) {
	var (
		tok              Token
		created, expires sql.NullString
	)
	id, err := scanIdentity(q.r.ReadRow(ctx, `SELECT `+identityColumns+`, k.id, k.hash, k.created_at, k.expires_at `+from, args...),
		&tok.ID, &tok.Hash, &created, &expires)
	if err != nil {
		return Identity{}, Token{}, sqlrow.Err(err, "token")
	}
	tok.Identity, tok.CreatedAt, tok.ExpiresAt = id.Name, sqlrow.ParseTime(created), sqlrow.ParseTime(expires)
	return id, tok, nil
}

// All lists the identities, by name, each with its live tokens.
func (q Reads) All(ctx context.Context) ([]Identity, error) {
	return q.identities(ctx, "")
}

// Get returns one identity with its live tokens, or sqlrow.ErrNotFound.
func (q Reads) Get(ctx context.Context, name string) (Identity, error) {
	ids, err := q.identities(ctx, name)
	if err == nil && len(ids) == 0 {
		err = sqlrow.ErrNotFound
	}
	if err != nil {
		return Identity{}, fmt.Errorf("store: identity %q: %w", name, err)
	}
	return ids[0], nil
}

// identities lists the identity name, or all if name is empty.
func (q Reads) identities(ctx context.Context, name string) ([]Identity, error) {
	rows, err := q.r.ReadRows(ctx, `SELECT `+identityColumns+` FROM identities i WHERE ? = '' OR i.name = ? ORDER BY i.name`, name, name)
	if err != nil {
		return nil, fmt.Errorf("store: list identities: %w", err)
	}
	out, err := sqlrow.Collect(rows, func(r sqlrow.Row) (Identity, error) { return scanIdentity(r) }, []Identity{})
	if err != nil {
		return nil, fmt.Errorf("store: list identities: %w", err)
	}
	byName := map[string]*Identity{}
	for i := range out {
		byName[out[i].Name] = &out[i]
	}
	rows, err = q.r.ReadRows(ctx, `SELECT k.id, k.identity, k.created_at, k.expires_at FROM identity_tokens k
		WHERE (? = '' OR k.identity = ?) AND `+live+` ORDER BY k.created_at, k.id`, name, name, sqlrow.Now())
	if err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	tokens, err := sqlrow.Collect(rows, scanToken, nil)
	if err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	for _, tok := range tokens {
		if id := byName[tok.Identity]; id != nil {
			id.Tokens = append(id.Tokens, tok)
		}
	}
	return out, nil
}

func scanToken(r sqlrow.Row) (Token, error) {
	var (
		tok              Token
		created, expires sql.NullString
	)
	err := r.Scan(&tok.ID, &tok.Identity, &created, &expires)
	tok.CreatedAt, tok.ExpiresAt = sqlrow.ParseTime(created), sqlrow.ParseTime(expires)
	return tok, err
}

// CreateLogin records a dashboard login, by the hash of its id, made with
// token tokenID, until expires. It keeps at most max logins: the oldest
// go first.
func (w Writes) CreateLogin(hash, tokenID string, expires time.Time, max int) error {
	if _, err := w.t.Exec(`DELETE FROM logins WHERE hash NOT IN (SELECT hash FROM logins ORDER BY expires_at DESC LIMIT ?)`, max-1); err != nil {
		return fmt.Errorf("store: drop the oldest logins: %w", err)
	}
	_, err := w.t.Exec(`INSERT INTO logins (hash, token_id, created_at, expires_at) VALUES (?, ?, ?, ?)`, hash, tokenID, sqlrow.Now(), sqlrow.FormatTime(expires))
	if err != nil {
		return fmt.Errorf("store: record login of token %s: %w", tokenID, err)
	}
	return nil
}

// DeleteLogin ends a login, if there is one.
func (w Writes) DeleteLogin(hash string) error {
	if _, err := w.t.Exec(`DELETE FROM logins WHERE hash = ?`, hash); err != nil {
		return fmt.Errorf("store: end login: %w", err)
	}
	return nil
}

// DeleteExpiredCredentials deletes the tokens and logins that expired
// before now, and returns how many.
func (w Writes) DeleteExpiredCredentials(before time.Time) (int, error) {
	cutoff := sqlrow.FormatTime(before)
	var total int64
	for _, q := range []string{
		`DELETE FROM identity_tokens WHERE expires_at IS NOT NULL AND expires_at <= ?`,
		`DELETE FROM logins WHERE expires_at <= ?`,
	} {
		res, err := w.t.Exec(q, cutoff)
		if err != nil {
			return 0, fmt.Errorf("store: expire credentials: %w", err)
		}
		n, _ := res.RowsAffected()
		total += n
	}
	return int(total), nil
}
