package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/edgeaip/edgeaip/internal/authlimit"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/metrics"
)

// gate is the guard of every route: it finds who a request acts for,
// counts and throttles failed authentications, and holds the caller to
// its route's rule and to its scope.
type gate struct {
	log       *slog.Logger
	auth      *identity.Authority
	authLimit *authlimit.Limiter
	metrics   *metrics.Metrics
	inScope   *inscope.Checker
	csrf      *http.CrossOriginProtection
}

// guard serves h as the policy says for the route key: public, or for an
// authenticated caller whose role and scope allow it, which h then finds
// with identity.CallerFrom. A route without a rule is refused to all.
func (g *gate) guard(key string, h http.Handler) http.Handler {
	ru, ok := identity.RuleFor(key)
	if !ok {
		g.log.Error("route has no access policy: refused to everyone", "route", key)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("%s has no access policy: refused", key))
		})
	}
	if ru.Public {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := g.admit(w, r)
		if !ok {
			return
		}
		if err := ru.Allows(c, key); err != nil {
			forbid(g.log, w, r, err)
			return
		}
		r = identity.WithCaller(r, c)
		if !g.pathInScope(w, r, ru.Scope) {
			return
		}
		h.ServeHTTP(w, r)
	})
}

// admit authenticates r, answering it if it cannot go on: 429 from a
// source that failed too often, 401 without live credentials, 403 for a
// cookie from another origin, 503 if the store fails.
func (g *gate) admit(w http.ResponseWriter, r *http.Request) (*identity.Caller, bool) {
	src := g.authLimit.Source(r)
	if wait := g.authLimit.Blocked(src); wait > 0 {
		g.tooManyFailures(w, metrics.SurfaceAPI, wait)
		return nil, false
	}
	c, err := g.authenticate(r)
	switch {
	case errors.Is(err, identity.ErrWrongToken):
		g.authFailed(src, metrics.SurfaceAPI, identity.RequestToken(r, false))
		unauthorized(w, err.Error())
	case errors.Is(err, identity.ErrNoCredentials), errors.Is(err, identity.ErrNoLogin):
		unauthorized(w, err.Error())
	case errors.Is(err, errForbiddenOrigin):
		forbid(g.log, w, r, err)
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
func (g *gate) authenticate(r *http.Request) (*identity.Caller, error) {
	if token := identity.RequestToken(r, false); token != "" {
		return g.auth.CallerByToken(r.Context(), token)
	}
	cookie, err := r.Cookie(LoginCookie)
	if err != nil || cookie.Value == "" {
		return nil, identity.ErrNoCredentials
	}
	c, err := g.auth.CallerByLogin(r.Context(), cookie.Value)
	if err != nil {
		return nil, err
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return c, g.fromDashboard(r)
	}
	return c, nil
}

// authFailed counts a failed authentication with token from src on
// surface, and logs the source being refused when this failure makes it
// so.
func (g *gate) authFailed(src netip.Addr, surface, token string) {
	AuthFailed(g.authLimit, g.metrics, src, surface, token)
}

// tooManyFailures answers 429 to a source refused for wait more.
func (g *gate) tooManyFailures(w http.ResponseWriter, surface string, wait int) {
	TooManyFailures(w, g.metrics, surface, wait)
}

// AuthFailed counts a failed authentication with token from src on
// surface (metrics.SurfaceAPI, …) in m and in l, which logs the source
// being refused when this failure makes it so. Every surface that
// authenticates on HTTP counts its failures so, the WebSocket's too.
func AuthFailed(l *authlimit.Limiter, m *metrics.Metrics, src netip.Addr, surface, token string) {
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
func (g *gate) pathInScope(w http.ResponseWriter, r *http.Request, sr identity.ScopeRule) bool {
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
		in, err = g.inScope.Device(r.Context(), c, id)
		missing = inscope.DeviceNotEnrolled(id)
	case identity.PathTask:
		in, err = g.inScope.Task(r.Context(), c, id)
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

// errForbiddenOrigin: a cookie-authenticated request that changes state
// must come from the dashboard's own origin.
var errForbiddenOrigin = errors.New("cross-origin request refused: a request authenticated by the login cookie that changes state must come from the dashboard's own page")

// fromDashboard checks that r comes from the dashboard's own origin. A
// request with neither Sec-Fetch-Site nor Origin is refused too: every
// browser that could hold the login cookie sends one of them.
func (g *gate) fromDashboard(r *http.Request) error {
	if r.Header.Get("Sec-Fetch-Site") == "" && r.Header.Get("Origin") == "" {
		return errForbiddenOrigin
	}
	if err := g.csrf.Check(r); err != nil {
		return fmt.Errorf("%w (%w)", errForbiddenOrigin, err)
	}
	return nil
}

// unauthorized answers 401 saying msg, with the challenge RFC 6750 asks
// of a Bearer resource: an MCP client (the Inspector) reads the
// challenge, and without one took the server for an OAuth one and asked
// for a TTY instead of showing msg. No realm but the server's is offered:
// its tokens are its own, not an authorization server's.
func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="aip-server", error="invalid_token", error_description=%q`, msg))
	writeError(w, http.StatusUnauthorized, msg)
}
