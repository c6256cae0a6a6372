package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/metrics"
)

// The dashboard's login: an operator token is posted once and traded for
// a cookie that names a login kept in the store, made with that token, so
// the token itself never sits in the browser. A login ends when it
// expires, on logout, or when its token or identity is revoked. See
// RATIONALE.md, "The dashboard's login".
const (
	loginCookie = "aip_login"
	// loginTTL is how long a login lasts; there is no renewal.
	loginTTL = 12 * time.Hour
	// maxLogins bounds the logins kept: the oldest goes first.
	maxLogins = 1000
)

// errForbiddenOrigin: a cookie-authenticated request that changes state
// must come from the dashboard's own origin.
var errForbiddenOrigin = errors.New("cross-origin request refused: a request authenticated by the login cookie that changes state must come from the dashboard's own page")

// fromDashboard checks that r comes from the dashboard's own origin. A
// request with neither Sec-Fetch-Site nor Origin is refused too: every
// browser that could hold the login cookie sends one of them.
func (s *Server) fromDashboard(r *http.Request) error {
	if r.Header.Get("Sec-Fetch-Site") == "" && r.Header.Get("Origin") == "" {
		return errForbiddenOrigin
	}
	if err := s.csrf.Check(r); err != nil {
		return fmt.Errorf("%w (%w)", errForbiddenOrigin, err)
	}
	return nil
}

// secureCookie says whether the login cookie must be Secure: when r came
// over TLS, through a proxy that says it did (X-Forwarded-Proto: https),
// or always with Config.SecureCookies. Trusting the header cannot weaken
// anything: a client that lies in it only keeps its own cookie off plain
// HTTP.
func (s *Server) secureCookie(r *http.Request) bool {
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return s.cfg.SecureCookies || r.TLS != nil || strings.EqualFold(strings.TrimSpace(proto), "https")
}

// login is POST /api/login {"token": ...}: it checks the operator token
// and sets the login cookie. A wrong token counts as a failed
// authentication from its source.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	src := s.authLimit.Source(r)
	if wait := s.authLimit.Blocked(src); wait > 0 {
		s.tooManyFailures(w, metrics.SurfaceLogin, wait)
		return
	}
	var req api.LoginRequest
	if !readJSON(w, r, &req) {
		return
	}
	c, err := s.auth.CallerByToken(r.Context(), req.Token)
	switch {
	case errors.Is(err, identity.ErrWrongToken):
		s.authFailed(src, metrics.SurfaceLogin, req.Token)
		s.log.Warn("dashboard login refused", "remote", r.RemoteAddr)
		writeError(w, http.StatusUnauthorized, "wrong operator token")
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	now, id := time.Now(), identity.NewToken("")
	err = s.store.Write(r.Context(), func(tx *store.Tx) error {
		return tx.CreateLogin(identity.HashToken(id), c.TokenID, now.Add(loginTTL), maxLogins)
	})
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: loginCookie, Value: id, Path: "/", Expires: now.Add(loginTTL), MaxAge: int(loginTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secureCookie(r),
	})
	s.log.Info("dashboard login", "remote", r.RemoteAddr, "identity", c.Name, "token_id", c.TokenID)
	writeJSON(w, http.StatusOK, api.LoginResponse{ExpiresAt: now.Add(loginTTL).UTC()})
}

// logout is POST /api/logout: it ends the login of the cookie, if any,
// and clears the cookie. Only the dashboard's own page may: another
// origin on the same site must not log the operator out.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if err := s.fromDashboard(r); err != nil {
		s.forbid(w, r, err)
		return
	}
	if c, err := r.Cookie(loginCookie); err == nil {
		err := s.store.Write(r.Context(), func(tx *store.Tx) error { return tx.DeleteLogin(identity.HashToken(c.Value)) })
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secureCookie(r)})
	w.WriteHeader(http.StatusNoContent)
}
