package server

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
)

// The dashboard's login: the operator token is posted once and traded for
// a cookie that names a server-side login, so the token itself never sits
// in the browser. See RATIONALE.md, "The dashboard's login".
const (
	loginCookie = "aip_login"
	// loginTTL is how long a login lasts; there is no renewal.
	loginTTL = 12 * time.Hour
	// maxLogins bounds the logins kept: the oldest goes first.
	maxLogins = 1000
)

// logins are the live dashboard logins, by the hash of their id, with
// their expiry. They live in memory: a restart logs everyone out.
type logins struct {
	mu      sync.Mutex
	expires map[string]time.Time
}

func newLogins() *logins { return &logins{expires: map[string]time.Time{}} }

// create starts a login and returns its id, the cookie's value.
func (l *logins) create(now time.Time) string {
	id := newToken("")
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropExpired(now)
	if len(l.expires) >= maxLogins {
		l.dropOldest()
	}
	l.expires[hashToken(id)] = now.Add(loginTTL)
	return id
}

// valid reports whether id names a login that has not expired.
func (l *logins) valid(id string, now time.Time) bool {
	if id == "" {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	exp, ok := l.expires[hashToken(id)]
	return ok && now.Before(exp)
}

func (l *logins) remove(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.expires, hashToken(id))
}

func (l *logins) dropExpired(now time.Time) {
	for h, exp := range l.expires {
		if !now.Before(exp) {
			delete(l.expires, h)
		}
	}
}

func (l *logins) dropOldest() {
	var oldest string
	for h, exp := range l.expires {
		if oldest == "" || exp.Before(l.expires[oldest]) {
			oldest = h
		}
	}
	delete(l.expires, oldest)
}

// errForbiddenOrigin: a cookie-authenticated request that changes state
// must come from the dashboard's own origin.
var errForbiddenOrigin = errors.New("cross-origin request refused: a request authenticated by the login cookie that changes state must come from the dashboard's own page")

// operatorAuth says whether r acts for the operator: by the operator
// token in a header, or by a login cookie. A cookie-authenticated request
// that changes state must also pass the same-origin check; a request that
// carries a token is not a browser's ambient credential and needs none.
func (s *Server) operatorAuth(r *http.Request) (bool, error) {
	if token := requestToken(r, false); token != "" {
		return sameHash(hashToken(token), s.adminHash), nil
	}
	c, err := r.Cookie(loginCookie)
	if err != nil || !s.logins.valid(c.Value, time.Now()) {
		return false, nil
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return true, s.fromDashboard(r)
	}
	return true, nil
}

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
// and sets the login cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	var req api.LoginRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Token == "" || !sameHash(hashToken(req.Token), s.adminHash) {
		s.log.Warn("dashboard login refused", "remote", r.RemoteAddr)
		writeError(w, http.StatusUnauthorized, "wrong operator token")
		return
	}
	now := time.Now()
	http.SetCookie(w, &http.Cookie{
		Name: loginCookie, Value: s.logins.create(now), Path: "/", Expires: now.Add(loginTTL), MaxAge: int(loginTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secureCookie(r),
	})
	s.log.Info("dashboard login", "remote", r.RemoteAddr)
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
		s.logins.remove(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secureCookie(r)})
	w.WriteHeader(http.StatusNoContent)
}
