package server

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Failed authentications are limited per source: after authFailures
// failures within authWindow, every authentication from that source is
// refused with 429 for authBlock, the right token included, so that
// guessing goes no faster. Only failures count: a busy client with a good
// token is never held back. A token that fails again within the window
// counts once: a revoked device (or a CI job with a stale token) retrying
// is not guessing, and must not get its whole site's address refused. See
// RATIONALE.md, "Identities".
const (
	authFailures = 20
	authWindow   = time.Minute
	authBlock    = time.Minute
	// maxAuthSources bounds the sources tracked: past it, the one whose
	// last failure is oldest is forgotten.
	maxAuthSources = 1 << 16
)

// authLimiter counts failed authentications per source address.
type authLimiter struct {
	now func() time.Time

	mu      sync.Mutex
	sources map[netip.Addr]*authSource
}

// authSource is one address's recent failures, at most authFailures,
// oldest first, and until when it is refused.
type authSource struct {
	failures     []authFailure
	blockedUntil time.Time
}

// authFailure is a token that failed, by a prefix of its hash, and when
// it last did.
type authFailure struct {
	token string
	at    time.Time
}

func newAuthLimiter(now func() time.Time) *authLimiter {
	return &authLimiter{now: now, sources: map[netip.Addr]*authSource{}}
}

// blocked returns how many seconds more src is refused, or 0.
func (l *authLimiter) blocked(src netip.Addr) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.sources[src]
	if a == nil {
		return 0
	}
	left := a.blockedUntil.Sub(l.now())
	if left <= 0 {
		return 0
	}
	return int(math.Ceil(left.Seconds()))
}

// failed counts a failure of token from src, unless token failed from
// src within the window already, and reports whether src is now refused.
func (l *authLimiter) failed(src netip.Addr, token string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	a := l.sources[src]
	if a == nil {
		l.makeRoom(now)
		a = &authSource{}
		l.sources[src] = a
	}
	key := hashToken(token)[:16]
	a.failures = slices.DeleteFunc(a.failures, func(f authFailure) bool { return f.token == key || now.Sub(f.at) >= authWindow })
	a.failures = append(a.failures, authFailure{token: key, at: now})
	if len(a.failures) >= authFailures {
		a.blockedUntil, a.failures = now.Add(authBlock), nil
	}
	return a.blockedUntil.After(now)
}

// count is how many sources are refused now, for the metric.
func (l *authLimiter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	now, n := l.now(), 0
	for _, a := range l.sources {
		if a.blockedUntil.After(now) {
			n++
		}
	}
	return n
}

// makeRoom forgets the sources with nothing recent to count, and, if that
// is not enough, the one whose last failure is oldest; l.mu is held.
func (l *authLimiter) makeRoom(now time.Time) {
	if len(l.sources) < maxAuthSources {
		return
	}
	var oldest netip.Addr
	var oldestAt time.Time
	for src, a := range l.sources {
		last := a.blockedUntil
		if n := len(a.failures); n > 0 && a.failures[n-1].at.After(last) {
			last = a.failures[n-1].at
		}
		if now.Sub(last) > authWindow && !a.blockedUntil.After(now) {
			delete(l.sources, src)
			continue
		}
		if oldestAt.IsZero() || last.Before(oldestAt) {
			oldest, oldestAt = src, last
		}
	}
	if len(l.sources) >= maxAuthSources {
		delete(l.sources, oldest)
	}
}

// source is the address a request comes from: its peer's, or, when the
// peer is a proxy the operator trusts (Config.TrustedProxies), the
// address X-Forwarded-For gives, read from the right: the first that is
// not a trusted proxy itself. A client cannot choose its source by
// sending the header: only trusted proxies are believed.
func (s *Server) source(r *http.Request) netip.Addr {
	peer := remoteAddr(r)
	if !s.trusted(peer) {
		return peer
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return peer
		}
		hop = hop.Unmap()
		if !s.trusted(hop) {
			return hop
		}
		peer = hop
	}
	return peer
}

func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// remoteAddr is the peer's address, or the zero Addr if it does not
// parse (then all such requests share one source).
func remoteAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

// authFailed counts a failed authentication with token from src on
// surface, and logs the source being refused when this failure makes it
// so.
func (s *Server) authFailed(src netip.Addr, surface, token string) {
	s.metrics.AuthFailed(surface)
	if s.authLimit.failed(src, token) {
		s.log.Warn("too many failed authentications: refusing the source", "source", src, "surface", surface,
			"failures", authFailures, "within", authWindow, "for", authBlock)
	}
}
