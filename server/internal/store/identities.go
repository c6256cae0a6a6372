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
// use fails with ErrExists.
func (w IdentityWrites) Create(id Identity, tok Token) error {
	tools, err := json.Marshal(sqlrow.List(id.Tools))
	if err != nil {
		return fmt.Errorf("store: identity %q: tools: %w", id.Name, err)
	}
	_, err = w.t.exec(`INSERT INTO identities (name, role, devices, tools, created_at) VALUES (?, ?, ?, ?, ?)`,
		id.Name, id.Role, id.Devices, string(tools), sqlrow.Now())
	if err != nil && dberr.UniqueViolated(err, "identities", "name") {
		return fmt.Errorf("store: identity %q: %w", id.Name, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("store: create identity %q: %w", id.Name, err)
	}
	tok.Identity = id.Name
	return w.t.Identities().AddToken(tok)
}

// AddToken gives tok.Identity another token; an identity that does not
// exist fails with ErrNotFound.
func (w IdentityWrites) AddToken(tok Token) error {
	var n int
	if err := w.t.queryRow(`SELECT count(*) FROM identities WHERE name = ?`, tok.Identity).Scan(&n); err != nil {
		return fmt.Errorf("store: identity %q: %w", tok.Identity, err)
	}
	if n == 0 {
		return fmt.Errorf("store: identity %q: %w", tok.Identity, ErrNotFound)
	}
	_, err := w.t.exec(`INSERT INTO identity_tokens (id, identity, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		tok.ID, tok.Identity, tok.Hash, sqlrow.Now(), sqlrow.NullTime(tok.ExpiresAt))
	if err != nil {
		return fmt.Errorf("store: identity %q: add token %s: %w", tok.Identity, tok.ID, err)
	}
	return nil
}

// Delete revokes an identity: its tokens and their logins go with
// it. It returns the ids of the tokens it had, and fails with ErrNotFound
// if there is no such identity, or ErrLastAdmin.
func (w IdentityWrites) Delete(name string) ([]string, error) {
	ids, err := w.t.tokenIDs(`SELECT id FROM identity_tokens WHERE identity = ?`, name)
	if err != nil {
		return nil, fmt.Errorf("store: revoke identity %q: %w", name, err)
	}
	if err := w.t.deleteKeepingAnAdmin(`DELETE FROM identities WHERE name = ?`, name); err != nil {
		return nil, fmt.Errorf("store: revoke identity %q: %w", name, err)
	}
	return ids, nil
}

// ExpireTokens makes every token of identity but keep stop working at at
// (at once if at is not in the future; a token due to expire sooner keeps
// its time), and returns their ids: a rotation. It fails with ErrNotFound
// if identity has no token keep.
func (w IdentityWrites) ExpireTokens(identity, keep string, at time.Time) ([]string, error) {
	var n int
	if err := w.t.queryRow(`SELECT count(*) FROM identity_tokens WHERE identity = ? AND id = ?`, identity, keep).Scan(&n); err != nil {
		return nil, fmt.Errorf("store: identity %q: %w", identity, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("store: identity %q: token %s: %w", identity, keep, ErrNotFound)
	}
	ids, err := w.t.tokenIDs(`SELECT id FROM identity_tokens WHERE identity = ? AND id != ?`, identity, keep)
	if err != nil {
		return nil, fmt.Errorf("store: identity %q: %w", identity, err)
	}
	if !at.After(time.Now()) {
		_, err = w.t.exec(`DELETE FROM identity_tokens WHERE identity = ? AND id != ?`, identity, keep)
	} else {
		_, err = w.t.exec(`UPDATE identity_tokens SET expires_at = ? WHERE identity = ? AND id != ? AND (expires_at IS NULL OR expires_at > ?)`,
			sqlrow.FormatTime(at), identity, keep, sqlrow.FormatTime(at))
	}
	if err != nil {
		return nil, fmt.Errorf("store: identity %q: expire tokens: %w", identity, err)
	}
	return ids, nil
}

// DeleteToken revokes one token of identity, and its logins. It fails with
// ErrNotFound if identity has no such token, or with ErrLastAdmin.
func (w IdentityWrites) DeleteToken(identity, id string) error {
	if err := w.t.deleteKeepingAnAdmin(`DELETE FROM identity_tokens WHERE identity = ? AND id = ?`, identity, id); err != nil {
		return fmt.Errorf("store: identity %q: revoke token %s: %w", identity, id, err)
	}
	return nil
}

// deleteKeepingAnAdmin runs a DELETE, which fails with ErrNotFound if it
// deletes nothing, or with ErrLastAdmin if it took the last unscoped
// admin token that does not expire: the caller's write is then rolled
// back, so that someone can still manage identities.
func (t *Tx) deleteKeepingAnAdmin(query string, args ...any) error {
	before, err := t.adminTokens()
	if err != nil {
		return err
	}
	res, err := t.exec(query, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	after, err := t.adminTokens()
	switch {
	case err != nil:
		return err
	case before > 0 && after == 0:
		return ErrLastAdmin
	}
	return nil
}

func (t *Tx) adminTokens() (int, error) {
	var n int
	err := t.queryRow(`SELECT count(*) FROM identities i JOIN identity_tokens k ON k.identity = i.name
		WHERE i.role = 'admin' AND i.devices = '' AND i.tools = '[]' AND k.expires_at IS NULL`).Scan(&n)
	return n, err
}

func (t *Tx) tokenIDs(query string, args ...any) ([]string, error) {
	rows, err := t.query(query, args...)
	if err != nil {
		return nil, err
	}
	return sqlrow.Collect(rows, func(r rowScanner) (string, error) {
		var id string
		return id, r.Scan(&id)
	}, []string{})
}

// Count counts the identities, revoked ones not included.
func (w IdentityWrites) Count() (int, error) {
	var n int
	if err := w.t.queryRow(`SELECT count(*) FROM identities`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: count identities: %w", err)
	}
	return n, nil
}

const identityColumns = `i.name, i.role, i.devices, i.tools, i.created_at`

func scanIdentity(row rowScanner, more ...any) (Identity, error) {
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
// identity, or ErrNotFound.
func (q IdentityReads) TokenByHash(ctx context.Context, hash string) (Identity, Token, error) {
	return q.s.tokenWhere(ctx, `FROM identity_tokens k JOIN identities i ON i.name = k.identity WHERE k.hash = ? AND `+live,
		hash, sqlrow.Now())
}

// Login returns the token, and its identity, that made the live login
// whose id hashes to hash, or ErrNotFound: a login ends when it expires
// or when its token does.
func (q IdentityReads) Login(ctx context.Context, hash string) (Identity, Token, error) {
	at := sqlrow.Now()
	return q.s.tokenWhere(ctx, `FROM logins l JOIN identity_tokens k ON k.id = l.token_id JOIN identities i ON i.name = k.identity
		WHERE l.hash = ? AND l.expires_at > ? AND `+live, hash, at, at)
}

func (s *Store) tokenWhere(ctx context.Context, from string, args ...any) (Identity, Token, error) {
	var (
		tok              Token
		created, expires sql.NullString
	)
	id, err := scanIdentity(s.readRow(ctx, `SELECT `+identityColumns+`, k.id, k.hash, k.created_at, k.expires_at `+from, args...),
		&tok.ID, &tok.Hash, &created, &expires)
	if err != nil {
		return Identity{}, Token{}, sqlrow.Err(err, "token")
	}
	tok.Identity, tok.CreatedAt, tok.ExpiresAt = id.Name, sqlrow.ParseTime(created), sqlrow.ParseTime(expires)
	return id, tok, nil
}

// All lists the identities, by name, each with its live tokens.
func (q IdentityReads) All(ctx context.Context) ([]Identity, error) {
	return q.s.identities(ctx, "")
}

// Get returns one identity with its live tokens, or ErrNotFound.
func (q IdentityReads) Get(ctx context.Context, name string) (Identity, error) {
	ids, err := q.s.identities(ctx, name)
	if err == nil && len(ids) == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return Identity{}, fmt.Errorf("store: identity %q: %w", name, err)
	}
	return ids[0], nil
}

// identities lists the identity name, or all if name is empty.
func (s *Store) identities(ctx context.Context, name string) ([]Identity, error) {
	rows, err := s.readRows(ctx, `SELECT `+identityColumns+` FROM identities i WHERE ? = '' OR i.name = ? ORDER BY i.name`, name, name)
	if err != nil {
		return nil, fmt.Errorf("store: list identities: %w", err)
	}
	out, err := sqlrow.Collect(rows, func(r rowScanner) (Identity, error) { return scanIdentity(r) }, []Identity{})
	if err != nil {
		return nil, fmt.Errorf("store: list identities: %w", err)
	}
	byName := map[string]*Identity{}
	for i := range out {
		byName[out[i].Name] = &out[i]
	}
	rows, err = s.readRows(ctx, `SELECT k.id, k.identity, k.created_at, k.expires_at FROM identity_tokens k
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

func scanToken(r rowScanner) (Token, error) {
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
func (w IdentityWrites) CreateLogin(hash, tokenID string, expires time.Time, max int) error {
	if _, err := w.t.exec(`DELETE FROM logins WHERE hash NOT IN (SELECT hash FROM logins ORDER BY expires_at DESC LIMIT ?)`, max-1); err != nil {
		return fmt.Errorf("store: drop the oldest logins: %w", err)
	}
	_, err := w.t.exec(`INSERT INTO logins (hash, token_id, created_at, expires_at) VALUES (?, ?, ?, ?)`, hash, tokenID, sqlrow.Now(), sqlrow.FormatTime(expires))
	if err != nil {
		return fmt.Errorf("store: record login of token %s: %w", tokenID, err)
	}
	return nil
}

// DeleteLogin ends a login, if there is one.
func (w IdentityWrites) DeleteLogin(hash string) error {
	if _, err := w.t.exec(`DELETE FROM logins WHERE hash = ?`, hash); err != nil {
		return fmt.Errorf("store: end login: %w", err)
	}
	return nil
}

// DeleteExpiredCredentials deletes the tokens and logins that expired
// before now, and returns how many.
func (w IdentityWrites) DeleteExpiredCredentials(before time.Time) (int, error) {
	cutoff := sqlrow.FormatTime(before)
	var total int64
	for _, q := range []string{
		`DELETE FROM identity_tokens WHERE expires_at IS NOT NULL AND expires_at <= ?`,
		`DELETE FROM logins WHERE expires_at <= ?`,
	} {
		res, err := w.t.exec(q, cutoff)
		if err != nil {
			return 0, fmt.Errorf("store: expire credentials: %w", err)
		}
		n, _ := res.RowsAffected()
		total += n
	}
	return int(total), nil
}

// IdentityWrites are a write's changes to identities, their tokens and their logins.
// Reached by [Tx.Identities]; they belong to the write's transaction.
type IdentityWrites struct{ t *Tx }

// Identities are this write's changes to what [IdentityWrites] keep.
func (t *Tx) Identities() IdentityWrites { return IdentityWrites{t} }

// IdentityReads are the reads of identities, their tokens and their logins.
// Reached by [Store.Identities].
type IdentityReads struct{ s *Store }

// Identities are the reads of what [IdentityReads] keep.
func (s *Store) Identities() IdentityReads { return IdentityReads{s} }
