// Package authlimit throttles failed authentications per source
// address: the server's surfaces and the agent's own MCP endpoint refuse
// a source that keeps failing, so that guessing a token goes no faster.
package authlimit

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// Failed authentications are limited per source: after AuthFailures
// failures within AuthWindow, every authentication from that source is
// refused with 429 for AuthBlock, the right token included, so that
// guessing goes no faster. Only failures count: a busy client with a good
// token is never held back. A token that fails again within the window
// counts once: a revoked device (or a CI job with a stale token) retrying
// is not guessing, and must not get its whole site's address refused. See
// server/internal/identity/RATIONALE.md, "Identities".
const (
	// AuthFailures is how many failures refuse a source.
	AuthFailures = 20
	// AuthWindow is how recent those failures must be.
	AuthWindow = time.Minute
	// AuthBlock is how long a source is refused then.
	AuthBlock = time.Minute
	// maxAuthSources bounds the sources tracked: past it, the one whose
	// last failure is oldest is forgotten.
	maxAuthSources = 1 << 16
)

// Limiter counts failed authentications per source address, and says
// which sources are refused for failing too often. It reads a request's
// source believing X-Forwarded-For only from the proxies it was built
// with (Source).
type Limiter struct {
	proxies []netip.Prefix
	log     *slog.Logger

	mu      sync.Mutex
	now     func() time.Time
	sources map[netip.Addr]*authSource
}

// authSource is one address's recent failures, at most AuthFailures,
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

// NewLimiter is a Limiter that believes X-Forwarded-For from the proxies
// in trusted, reads the time from now, and logs to log.
func NewLimiter(trusted []netip.Prefix, now func() time.Time, log *slog.Logger) *Limiter {
	return &Limiter{proxies: trusted, now: now, log: log, sources: map[netip.Addr]*authSource{}}
}

// SetClock makes l read the time from now from here on, as a test's fake
// clock: safe while l is in use.
func (l *Limiter) SetClock(now func() time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.now = now
}

// Blocked returns how many seconds more src is refused, or 0.
func (l *Limiter) Blocked(src netip.Addr) int {
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
func (l *Limiter) failed(src netip.Addr, token string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	a := l.sources[src]
	if a == nil {
		l.makeRoom(now)
		a = &authSource{}
		l.sources[src] = a
	}
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:8])
	a.failures = slices.DeleteFunc(a.failures, func(f authFailure) bool { return f.token == key || now.Sub(f.at) >= AuthWindow })
	a.failures = append(a.failures, authFailure{token: key, at: now})
	if len(a.failures) >= AuthFailures {
		a.blockedUntil, a.failures = now.Add(AuthBlock), nil
	}
	return a.blockedUntil.After(now)
}

// Refused is how many sources are refused now, for the metric.
func (l *Limiter) Refused() int {
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
func (l *Limiter) makeRoom(now time.Time) {
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
		if now.Sub(last) > AuthWindow && !a.blockedUntil.After(now) {
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

// Source is the address a request comes from: its peer's, or, when the
// peer is a proxy the operator trusts (the server's Config.TrustedProxies), the
// address X-Forwarded-For gives, read from the right: the first that is
// not a trusted proxy itself. A client cannot choose its source by
// sending the header: only trusted proxies are believed.
func (l *Limiter) Source(r *http.Request) netip.Addr {
	peer := remoteAddr(r)
	if !l.trusted(peer) {
		return peer
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return peer
		}
		hop = hop.Unmap()
		if !l.trusted(hop) {
			return hop
		}
		peer = hop
	}
	return peer
}

// trusted reports whether a is a proxy whose X-Forwarded-For is believed.
func (l *Limiter) trusted(a netip.Addr) bool {
	for _, p := range l.proxies {
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

// Failed counts a failed authentication with token from src on surface,
// unless token failed from src within the window already, and logs the
// source being refused when this failure makes it so.
func (l *Limiter) Failed(src netip.Addr, surface, token string) {
	if l.failed(src, token) {
		l.log.Warn("too many failed authentications: refusing the source", "source", src, "surface", surface,
			"failures", AuthFailures, "within", AuthWindow, "for", AuthBlock)
	}
}
