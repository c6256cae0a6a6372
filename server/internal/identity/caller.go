package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// Caller is who a request, or a constellation's link, acts for: an
// operator identity, by one of its tokens (from the dashboard, by a login
// made with it). See RATIONALE.md, "Identities".
type Caller struct {
	// Name is the identity's.
	Name string
	// Role is the most the identity may do.
	Role access.Role
	// Scope narrows the devices and tools the identity sees; zero: all.
	Scope access.Scope
	// TokenID is the public id of the token it acts by.
	TokenID string
	// rollout marks the server acting for a rollout (RolloutCaller).
	rollout bool
}

// RolloutCaller is who rollout name's tasks run as: the server itself,
// with the deployer's role and no scope. No identity can be named
// "rollout/…": identity names have no '/'.
func RolloutCaller(name string) *Caller {
	return &Caller{Name: "rollout/" + name, Role: access.Deployer, rollout: true}
}

// ForRollout reports whether c is rollout name's (RolloutCaller): only
// a rollout stages modules and applies revisions on a device, and only
// its own.
func (c *Caller) ForRollout(name string) bool { return c.rollout && c.Name == "rollout/"+name }

// ARollout reports whether c is any rollout's.
func (c *Caller) ARollout() bool { return c.rollout }

// callerOf is the identity id as the store holds it, acting by token tok.
func callerOf(id store.Identity, tok store.Token) (*Caller, error) {
	role, err := access.ParseRole(id.Role)
	if err != nil {
		return nil, fmt.Errorf("identity %q: role %w", id.Name, err)
	}
	c := &Caller{Name: id.Name, Role: role, TokenID: tok.ID}
	if id.Devices != "" || len(id.Tools) > 0 {
		if c.Scope, err = access.ParseScope(id.Devices, id.Tools); err != nil {
			return nil, fmt.Errorf("identity %q: scope: %w", id.Name, err)
		}
	}
	return c, nil
}

// By names the caller as tasks, commands and the audit log record it.
func (c *Caller) By() store.By { return store.By{Identity: c.Name, TokenID: c.TokenID} }

// Requester is the caller asking for a task through kind (the API, or a
// constellation with client id).
func (c *Caller) Requester(kind, id string) api.Requester {
	return api.Requester{Kind: kind, ID: id, Identity: c.Name, TokenID: c.TokenID}
}

// Audit is an audit entry recording action by c, on device deviceID if
// any, with params saying what changed.
func (c *Caller) Audit(action, deviceID string, params map[string]any) store.AuditEntry {
	if params == nil {
		params = map[string]any{}
	}
	b, _ := json.Marshal(params) // maps of strings and slices always encode
	return store.AuditEntry{Actor: api.RequesterOperator, By: c.By(), Action: action, DeviceID: deviceID, Parameters: b}
}

// Scoped reports whether a scope narrows what the caller sees.
func (c *Caller) Scoped() bool { return !c.Scope.Unscoped() }

// The ways authentication fails.
var (
	// ErrNoCredentials: the request carries no token and no login.
	ErrNoCredentials = errors.New("missing operator token")
	// ErrWrongToken: a token that is no live operator token. Only these
	// count toward a source's limit of failures: a login cookie that
	// expired is no guess.
	ErrWrongToken = errors.New("wrong operator token")
	// ErrNoLogin: a login cookie that names no live login.
	ErrNoLogin = errors.New("not logged in, or the login has ended")
)

// CallerByToken finds the identity token belongs to: ErrWrongToken if
// none (a RevokedError if it was revoked). A token found is kept in the cache of callers until its identity
// is revoked, it expires, or the cache's time for it is up.
func (a *Authority) CallerByToken(ctx context.Context, token string) (*Caller, error) {
	hash, now := HashToken(token), a.now()
	c, gen := a.callers.get(hash, now)
	if c != nil {
		return c, nil
	}
	id, tok, err := a.store.Identities().TokenByHash(ctx, hash)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, a.wrongOrRevoked(ctx, hash)
	case err != nil:
		return nil, err
	case !sameHash(tok.Hash, hash):
		return nil, ErrWrongToken
	}
	if c, err = callerOf(id, tok); err != nil {
		return nil, err
	}
	a.callers.put(hash, c, tok.ExpiresAt, gen, now)
	return c, nil
}

// CallerByLogin finds the identity that the dashboard's login loginID
// (its cookie's value) was made by: ErrNoLogin if there is no such live
// login. Logins are read from the store every time.
func (a *Authority) CallerByLogin(ctx context.Context, loginID string) (*Caller, error) {
	id, tok, err := a.store.Identities().Login(ctx, HashToken(loginID))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, ErrNoLogin
	case err != nil:
		return nil, err
	}
	return callerOf(id, tok)
}

type callerKey struct{}

// WithCaller is r acting for c.
func WithCaller(r *http.Request, c *Caller) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
}

// CallerFrom is whom the request acts for, as the policy admitted it.
// Every route but the public ones has one.
func CallerFrom(r *http.Request) *Caller { return CallerIn(r.Context()) }

// CallerIn is whom the request whose context is ctx acts for, as
// CallerFrom: an MCP tool's handler has the context alone.
func CallerIn(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}
