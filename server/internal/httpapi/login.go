package httpapi

import (
	"errors"
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
	// LoginCookie is the name of the cookie that carries a login.
	LoginCookie = "aip_login"
	// LoginTTL is how long a login lasts; there is no renewal.
	LoginTTL = 12 * time.Hour
	// maxLogins bounds the logins kept: the oldest goes first.
	maxLogins = 1000
)

// secureCookie says whether the login cookie must be Secure: when r came
// over TLS, through a proxy that says it did (X-Forwarded-Proto: https),
// or always with Config.SecureCookies. Trusting the header cannot weaken
// anything: a client that lies in it only keeps its own cookie off plain
// HTTP.
func (h *identityHandlers) secureCookie(r *http.Request) bool {
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return h.secureCookies || r.TLS != nil || strings.EqualFold(strings.TrimSpace(proto), "https")
}

// login is POST /api/login {"token": ...}: it checks the operator token
// and sets the login cookie. A wrong token counts as a failed
// authentication from its source.
func (h *identityHandlers) login(w http.ResponseWriter, r *http.Request) {
	src := h.gate.authLimit.Source(r)
	if wait := h.gate.authLimit.Blocked(src); wait > 0 {
		h.gate.tooManyFailures(w, metrics.SurfaceLogin, wait)
		return
	}
	var req api.LoginRequest
	if !readJSON(w, r, &req) {
		return
	}
	c, err := h.auth.CallerByToken(r.Context(), req.Token)
	switch {
	case errors.Is(err, identity.ErrWrongToken):
		h.gate.authFailed(src, metrics.SurfaceLogin, req.Token)
		h.log.Warn("dashboard login refused", "remote", r.RemoteAddr)
		writeError(w, http.StatusUnauthorized, err.Error()) // a revoked token is told so (identity.RevokedError)
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	now, id := time.Now(), identity.NewToken("")
	err = h.store.Write(r.Context(), func(tx *store.Tx) error {
		return tx.Identities().CreateLogin(identity.HashToken(id), c.TokenID, now.Add(LoginTTL), maxLogins)
	})
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: LoginCookie, Value: id, Path: "/", Expires: now.Add(LoginTTL), MaxAge: int(LoginTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.secureCookie(r),
	})
	h.log.Info("dashboard login", "remote", r.RemoteAddr, "identity", c.Name, "token_id", c.TokenID)
	writeJSON(w, http.StatusOK, api.LoginResponse{ExpiresAt: now.Add(LoginTTL).UTC()})
}

// logout is POST /api/logout: it ends the login of the cookie, if any,
// and clears the cookie. Only the dashboard's own page may: another
// origin on the same site must not log the operator out.
func (h *identityHandlers) logout(w http.ResponseWriter, r *http.Request) {
	if err := h.gate.fromDashboard(r); err != nil {
		forbid(h.log, w, r, err)
		return
	}
	if c, err := r.Cookie(LoginCookie); err == nil {
		err := h.store.Write(r.Context(), func(tx *store.Tx) error { return tx.Identities().DeleteLogin(identity.HashToken(c.Value)) })
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: LoginCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.secureCookie(r)})
	w.WriteHeader(http.StatusNoContent)
}
