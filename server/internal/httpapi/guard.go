package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/metrics"
)

// guard serves h as the policy says for the route key: public, or for an
// authenticated caller whose role and scope allow it, which h then finds
// with identity.CallerFrom. A route without a rule is refused to all.
func (a *API) guard(key string, h http.Handler) http.Handler {
	ru, ok := identity.RuleFor(key)
	if !ok {
		a.log.Error("route has no access policy: refused to everyone", "route", key)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("%s has no access policy: refused", key))
		})
	}
	if ru.Public {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := a.admit(w, r)
		if !ok {
			return
		}
		if err := ru.Allows(c, key); err != nil {
			a.forbid(w, r, err)
			return
		}
		r = identity.WithCaller(r, c)
		if !a.pathInScope(w, r, ru.Scope) {
			return
		}
		h.ServeHTTP(w, r)
	})
}

// admit authenticates r, answering it if it cannot go on: 429 from a
// source that failed too often, 401 without live credentials, 403 for a
// cookie from another origin, 503 if the store fails.
func (a *API) admit(w http.ResponseWriter, r *http.Request) (*identity.Caller, bool) {
	src := a.authLimit.Source(r)
	if wait := a.authLimit.Blocked(src); wait > 0 {
		a.tooManyFailures(w, metrics.SurfaceAPI, wait)
		return nil, false
	}
	c, err := a.authenticate(r)
	switch {
	case errors.Is(err, identity.ErrWrongToken):
		a.authFailed(src, metrics.SurfaceAPI, identity.RequestToken(r, false))
		writeError(w, http.StatusUnauthorized, err.Error())
	case errors.Is(err, identity.ErrNoCredentials), errors.Is(err, identity.ErrNoLogin):
		writeError(w, http.StatusUnauthorized, err.Error())
	case errors.Is(err, errForbiddenOrigin):
		a.forbid(w, r, err)
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
	default:
		return c, true
	}
	return nil, false
}

// authenticate finds whom r acts for: by the token in a header, or by a
// login cookie. A cookie-authenticated request that changes state must
// also pass the same-origin check (the error is errForbiddenOrigin, with
// the caller); a request that carries a token is not a browser's ambient
// credential and needs none.
func (a *API) authenticate(r *http.Request) (*identity.Caller, error) {
	if token := identity.RequestToken(r, false); token != "" {
		return a.auth.CallerByToken(r.Context(), token)
	}
	cookie, err := r.Cookie(LoginCookie)
	if err != nil || cookie.Value == "" {
		return nil, identity.ErrNoCredentials
	}
	c, err := a.auth.CallerByLogin(r.Context(), cookie.Value)
	if err != nil {
		return nil, err
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return c, a.fromDashboard(r)
	}
	return c, nil
}

// authFailed counts a failed authentication with token from src on
// surface, and logs the source being refused when this failure makes it
// so.
func (a *API) authFailed(src netip.Addr, surface, token string) {
	AuthFailed(a.authLimit, a.metrics, src, surface, token)
}

// tooManyFailures answers 429 to a source refused for wait more.
func (a *API) tooManyFailures(w http.ResponseWriter, surface string, wait int) {
	TooManyFailures(w, a.metrics, surface, wait)
}

// AuthFailed counts a failed authentication with token from src on
// surface (metrics.SurfaceAPI, …) in m and in l, which logs the source
// being refused when this failure makes it so. Every surface that
// authenticates on HTTP counts its failures so, the WebSocket's too.
func AuthFailed(l *identity.Limiter, m *metrics.Metrics, src netip.Addr, surface, token string) {
	m.AuthFailed(surface)
	l.Failed(src, surface, token)
}

// TooManyFailures answers 429 to a source refused for wait more
// seconds, on surface, and counts it in m.
func TooManyFailures(w http.ResponseWriter, m *metrics.Metrics, surface string, wait int) {
	m.AuthThrottled(surface)
	w.Header().Set("Retry-After", strconv.Itoa(wait))
	writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many failed authentications from this address: try again in %d s", wait))
}

// pathInScope holds a scoped caller to its scope for the object the
// path names, answering 404 for one outside it, as for one that does not
// exist.
func (a *API) pathInScope(w http.ResponseWriter, r *http.Request, sr identity.ScopeRule) bool {
	c := identity.CallerFrom(r)
	if !c.Scoped() {
		return true
	}
	id := r.PathValue("id")
	var in bool
	var err error
	var missing string
	switch sr {
	case identity.PathDevice:
		in, err = a.inScope.Device(r.Context(), c, id)
		missing = inscope.DeviceNotEnrolled(id)
	case identity.PathTask:
		in, err = a.inScope.Task(r.Context(), c, id)
		missing = inscope.NoTask(id)
	default:
		return true
	}
	switch {
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case !in:
		writeError(w, http.StatusNotFound, missing)
	}
	return err == nil && in
}
