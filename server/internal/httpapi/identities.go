package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// validIdentityName is what identity names may look like: safe in paths,
// logs and the audit log, with room for an e-mail address.
var validIdentityName = regexp.MustCompile(`^[A-Za-z0-9_@-][A-Za-z0-9._@-]{0,63}$`)

// maxRotationGrace bounds how long a rotation may keep the old tokens.
const maxRotationGrace = 30 * 24 * time.Hour

// identityHandlers serve the operators' identities: adding, listing,
// revoking and rotating them and their tokens, whoami, and the
// dashboard's login.
type identityHandlers struct {
	log   *slog.Logger
	store *store.Store
	auth  *identity.Authority
	// gate counts and throttles the login's failed authentications.
	gate *gate
	// revoke, stop and secureCookies are Config's Revoke, Stop and
	// SecureCookies.
	revoke        func(identity.Revocation)
	stop          <-chan struct{}
	secureCookies bool
}

// identityRequest is an IdentityRequest checked: 400 names the field at
// fault.
func identityRequest(req api.IdentityRequest) (store.Identity, error) {
	if !validIdentityName.MatchString(req.Name) {
		return store.Identity{}, fmt.Errorf(`field "name": %q: want 1-64 of [A-Za-z0-9._@-], not starting with '.'`, req.Name)
	}
	role, err := access.ParseRole(req.Role)
	if err != nil {
		return store.Identity{}, fmt.Errorf(`field "role": %w`, err)
	}
	id := store.Identity{Name: req.Name, Role: role.String()}
	if req.Scope == nil {
		return id, nil
	}
	scope, err := access.ParseScope(req.Scope.Devices, req.Scope.Tools)
	if err != nil {
		field := "scope"
		var bad *access.FieldError
		if errors.As(err, &bad) && bad.Field != "" {
			field, err = field+"."+bad.Field, bad.Err
		}
		return store.Identity{}, fmt.Errorf("field %q: %w", field, err)
	}
	id.Devices, id.Tools = scope.Devices.String(), scope.ToolStrings()
	return id, nil
}

// addIdentity is POST /api/identities: a new identity and its first
// token, shown this once.
func (h *identityHandlers) addIdentity(w http.ResponseWriter, r *http.Request) {
	var req api.IdentityRequest
	if !readJSON(w, r, &req) {
		return
	}
	id, err := identityRequest(req)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	token, tok := identity.NewOperatorToken(id.Name)
	c := identity.CallerFrom(r)
	err = h.store.Write(r.Context(), func(tx *store.Tx) error {
		if err := tx.Identities().Create(id, tok); err != nil {
			return err
		}
		return tx.Audit().Append(c.Audit(api.ActionIdentityAdd, "", map[string]any{
			"name": id.Name, "role": id.Role, "token_id": tok.ID, "scope": scopeView(id)}))
	})
	switch {
	case errors.Is(err, store.ErrExists):
		writeError(w, http.StatusConflict, fmt.Sprintf("identity %q exists", id.Name))
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	h.log.Info("identity added", "identity", id.Name, "role", id.Role, "token_id", tok.ID, "by", c.Name)
	writeJSON(w, http.StatusCreated, api.TokenResponse{Identity: id.Name, TokenID: tok.ID, Token: token})
}

// listIdentities is GET /api/identities.
func (h *identityHandlers) listIdentities(w http.ResponseWriter, r *http.Request) {
	ids, err := h.store.Identities().All(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	out := make([]api.Identity, len(ids))
	for i, id := range ids {
		out[i] = api.Identity{Name: id.Name, Role: id.Role, Scope: scopeView(id), CreatedAt: id.CreatedAt, Tokens: tokenViews(id.Tokens)}
	}
	writeJSON(w, http.StatusOK, out)
}

// scopeView is an identity's scope as the API shows it: nil if none.
func scopeView(id store.Identity) *api.Scope {
	if id.Devices == "" && len(id.Tools) == 0 {
		return nil
	}
	return &api.Scope{Devices: id.Devices, Tools: id.Tools}
}

func tokenViews(tokens []store.Token) []api.IdentityToken {
	out := make([]api.IdentityToken, len(tokens))
	for i, t := range tokens {
		out[i] = api.IdentityToken{ID: t.ID, CreatedAt: t.CreatedAt, ExpiresAt: timePtr(t.ExpiresAt)}
	}
	return out
}

// revokeIdentity is DELETE /api/identities/{name}: its tokens stop
// working, and what they have open closes.
func (h *identityHandlers) revokeIdentity(w http.ResponseWriter, r *http.Request) {
	name, c := r.PathValue("name"), identity.CallerFrom(r)
	err := h.store.Write(r.Context(), func(tx *store.Tx) error {
		if _, err := tx.Identities().Delete(name); err != nil {
			return err
		}
		return tx.Audit().Append(c.Audit(api.ActionIdentityRevoke, "", map[string]any{"name": name}))
	})
	if !h.identityWritten(w, name, err) {
		return
	}
	h.revoke(identity.Revocation{Identity: name})
	h.log.Info("identity revoked", "identity", name, "by", c.Name)
	w.WriteHeader(http.StatusNoContent)
}

// revokeToken is DELETE /api/identities/{name}/tokens/{token_id}.
func (h *identityHandlers) revokeToken(w http.ResponseWriter, r *http.Request) {
	name, id, c := r.PathValue("name"), r.PathValue("token_id"), identity.CallerFrom(r)
	err := h.store.Write(r.Context(), func(tx *store.Tx) error {
		if err := tx.Identities().DeleteToken(name, id); err != nil {
			return err
		}
		return tx.Audit().Append(c.Audit(api.ActionIdentityRevokeToken, "", map[string]any{"name": name, "token_id": id}))
	})
	if !h.identityWritten(w, name, err) {
		return
	}
	h.revoke(identity.Revocation{Identity: name, TokenIDs: []string{id}})
	h.log.Info("token revoked", "identity", name, "token_id", id, "by", c.Name)
	w.WriteHeader(http.StatusNoContent)
}

// rotateIdentity is POST /api/identities/{name}/tokens: a new token, shown
// this once; the identity's other tokens stop working after the grace.
func (h *identityHandlers) rotateIdentity(w http.ResponseWriter, r *http.Request) {
	name, c := r.PathValue("name"), identity.CallerFrom(r)
	var req api.IdentityRotateRequest
	if !readJSON(w, r, &req) {
		return
	}
	grace, err := rotationGrace(req.Grace)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	token, tok := identity.NewOperatorToken(name)
	ends := time.Now().Add(grace)
	var old []string
	err = h.store.Write(r.Context(), func(tx *store.Tx) error {
		if err := tx.Identities().AddToken(tok); err != nil {
			return err
		}
		var err error
		if old, err = tx.Identities().ExpireTokens(name, tok.ID, ends); err != nil {
			return err
		}
		return tx.Audit().Append(c.Audit(api.ActionIdentityRotate, "", map[string]any{
			"name": name, "token_id": tok.ID, "grace": grace.String(), "ending": old}))
	})
	if !h.identityWritten(w, name, err) {
		return
	}
	// The old tokens' callers are read again, with their expiry, which
	// the cache then checks; their revocation at the end of the grace
	// drops them anyway.
	h.auth.ForgetCallers(name)
	h.revokeAfter(grace, identity.Revocation{Identity: name, TokenIDs: old})
	h.log.Info("identity rotated", "identity", name, "token_id", tok.ID, "ending", old, "grace", grace, "by", c.Name)
	resp := api.TokenResponse{Identity: name, TokenID: tok.ID, Token: token}
	for _, id := range old {
		resp.Expiring = append(resp.Expiring, api.IdentityToken{ID: id, ExpiresAt: &ends})
	}
	writeJSON(w, http.StatusCreated, resp)
}

// rotationGrace reads a rotation's grace: a duration from 0 to
// maxRotationGrace; empty is 0.
func rotationGrace(text string) (time.Duration, error) {
	if text == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(text)
	if err != nil || d < 0 || d > maxRotationGrace {
		return 0, fmt.Errorf(`field "grace": %q: want a duration from 0s to %s`, text, maxRotationGrace)
	}
	return d, nil
}

// revokeAfter revokes v once grace has passed, when a rotation's old
// tokens stop: the store stops taking them then by itself, and this
// closes what they still have open. A server that stops first has
// nothing open.
func (h *identityHandlers) revokeAfter(grace time.Duration, v identity.Revocation) {
	if len(v.TokenIDs) == 0 {
		return
	}
	if grace <= 0 {
		h.revoke(v)
		return
	}
	time.AfterFunc(grace, func() {
		select {
		case <-h.stop:
		default:
			h.revoke(v)
		}
	})
}

// identityWritten answers a failed change to identity name: 404, 409 for
// the last unscoped admin, or 503. It reports whether err is nil.
func (h *identityHandlers) identityWritten(w http.ResponseWriter, name string, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no identity %q, or no such token of it", name))
	case errors.Is(err, store.ErrLastAdmin):
		writeError(w, http.StatusConflict, fmt.Sprintf("identity %q: refused: %v; add another admin first", name, store.ErrLastAdmin))
	default:
		writeError(w, http.StatusServiceUnavailable, err.Error())
	}
	return false
}

// whoami is GET /api/whoami: the identity the request acts for.
func (h *identityHandlers) whoami(w http.ResponseWriter, r *http.Request) {
	c := identity.CallerFrom(r)
	out := api.Caller{Name: c.Name, Role: c.Role.String(), TokenID: c.TokenID}
	if c.Scoped() {
		out.Scope = &api.Scope{Devices: c.Scope.Devices.String(), Tools: c.Scope.ToolStrings()}
	}
	writeJSON(w, http.StatusOK, out)
}
