package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// caller is who a request, or a constellation's link, acts for: an
// operator identity, by one of its tokens (from the dashboard, by a login
// made with it). See RATIONALE.md, "Identities".
type caller struct {
	name    string
	role    access.Role
	scope   access.Scope
	tokenID string
}

// callerOf is the identity id as the store holds it, acting by token tok.
func callerOf(id store.Identity, tok store.Token) (*caller, error) {
	role, err := access.ParseRole(id.Role)
	if err != nil {
		return nil, fmt.Errorf("identity %q: role %w", id.Name, err)
	}
	c := &caller{name: id.Name, role: role, tokenID: tok.ID}
	if id.Devices != "" || len(id.Tools) > 0 {
		if c.scope, err = access.ParseScope(id.Devices, id.Tools); err != nil {
			return nil, fmt.Errorf("identity %q: scope: %w", id.Name, err)
		}
	}
	return c, nil
}

// by names the caller as tasks, commands and the audit log record it.
func (c *caller) by() store.By { return store.By{Identity: c.name, TokenID: c.tokenID} }

// requester is the caller asking for a task through kind (the API, or a
// constellation with client id).
func (c *caller) requester(kind, id string) api.Requester {
	return api.Requester{Kind: kind, ID: id, Identity: c.name, TokenID: c.tokenID}
}

// audit is an audit entry recording action by c, on device deviceID if
// any, with params saying what changed.
func (c *caller) audit(action, deviceID string, params map[string]any) store.AuditEntry {
	if params == nil {
		params = map[string]any{}
	}
	b, _ := json.Marshal(params) // maps of strings and slices always encode
	return store.AuditEntry{Actor: api.RequesterOperator, By: c.by(), Action: action, DeviceID: deviceID, Parameters: b}
}

// scoped reports whether a scope narrows what the caller sees.
func (c *caller) scoped() bool { return !c.scope.Unscoped() }

// The ways authentication fails.
var (
	// errNoCredentials: the request carries no token and no login.
	errNoCredentials = errors.New("missing operator token")
	// errWrongToken: a token that is no live operator token. Only these
	// count toward a source's limit of failures: a login cookie that
	// expired is no guess.
	errWrongToken = errors.New("wrong operator token")
	// errNoLogin: a login cookie that names no live login.
	errNoLogin = errors.New("not logged in, or the login has ended")
)

// callerByToken finds the identity token belongs to: errWrongToken if
// none.
func (s *Server) callerByToken(ctx context.Context, token string) (*caller, error) {
	hash, now := hashToken(token), time.Now()
	c, gen := s.callers.get(hash, now)
	if c != nil {
		return c, nil
	}
	id, tok, err := s.store.TokenByHash(ctx, hash)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, errWrongToken
	case err != nil:
		return nil, err
	case !sameHash(tok.Hash, hash):
		return nil, errWrongToken
	}
	if c, err = callerOf(id, tok); err != nil {
		return nil, err
	}
	s.callers.put(hash, c, tok.ExpiresAt, gen, now)
	return c, nil
}

// authenticate finds whom r acts for: by the token in a header, or by a
// login cookie. A cookie-authenticated request that changes state must
// also pass the same-origin check (the error is errForbiddenOrigin, with
// the caller); a request that carries a token is not a browser's ambient
// credential and needs none.
func (s *Server) authenticate(r *http.Request) (*caller, error) {
	if token := requestToken(r, false); token != "" {
		return s.callerByToken(r.Context(), token)
	}
	cookie, err := r.Cookie(loginCookie)
	if err != nil || cookie.Value == "" {
		return nil, errNoCredentials
	}
	id, tok, err := s.store.Login(r.Context(), hashToken(cookie.Value))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, errNoLogin
	case err != nil:
		return nil, err
	}
	c, err := callerOf(id, tok)
	if err != nil {
		return nil, err
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return c, s.fromDashboard(r)
	}
	return c, nil
}

type callerKey struct{}

// withCaller is r acting for c.
func withCaller(r *http.Request, c *caller) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
}

// callerFrom is whom the request acts for, as the policy admitted it.
// Every route but the public ones has one.
func callerFrom(r *http.Request) *caller {
	c, _ := r.Context().Value(callerKey{}).(*caller)
	return c
}
