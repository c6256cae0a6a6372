package link

import (
	"cmp"
	"context"
	"hash/maphash"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/protocol"
)

// Pace spaces the link's attempts; a zero field takes its default.
type Pace struct {
	// Base and Max bound the backoff between rounds (backoff.Backoff):
	// 500 ms and 30 s by default.
	Base, Max time.Duration
	// Gap bounds the jittered wait before the next server of a round:
	// 250 ms by default. Short, so that a dead server delays a device by
	// a fraction of a second; not zero, so that a fleet that lost one
	// server does not land on the next in the same millisecond.
	Gap time.Duration
	// DrainSpread bounds the jittered wait before the next server when a
	// draining server closed the link (close code 1012): 5 s by default,
	// ten times the first step of the backoff, so that the devices of a
	// node leaving on purpose reach the others at a tenth of the rate of
	// those of a node that died (agent/RATIONALE.md, "Several servers").
	DrainSpread time.Duration
}

// withDefaults fills in the fields p leaves unset.
func (p Pace) withDefaults() Pace {
	if p.Base <= 0 {
		p.Base = 500 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 30 * time.Second
	}
	if p.Gap <= 0 {
		p.Gap = 250 * time.Millisecond
	}
	if p.DrainSpread <= 0 {
		p.DrainSpread = 5 * time.Second
	}
	return p
}

// jitter is a wait uniform in (0, d].
func jitter(d time.Duration) time.Duration { return rand.N(d) + 1 }

// target is one place to dial: a server URL and, when its host is a name,
// one of the addresses the name resolved to, dialled under the name, so
// that the TLS server name and the Host header stay the URL's. An empty
// addr dials the URL as it is.
type target struct{ url, addr string }

// LogValue names the target in logs, its URL redacted.
func (t target) LogValue() slog.Value {
	if t.addr == "" {
		return slog.StringValue(protocol.RedactURL(t.url))
	}
	return slog.StringValue(protocol.RedactURL(t.url) + " at " + t.addr)
}

// resolveTimeout bounds the lookup of a server's name.
const resolveTimeout = 5 * time.Second

// round is the targets of one round of attempts: every address of every
// server, looked up again, in the link's own order, from the one after
// prev; from the first, prev nil, in the first round. Each link orders
// the targets by a hash under its own random seed: a fleet spreads over
// the servers at the start, and the devices of a server that dies spread
// over the others, where the order of the config would send them all to
// the next one in it (BENCHMARKS.md, "Agents with several servers"). A
// target the name did not resolve to before takes a random place.
func (l *Link) round(ctx context.Context, prev *target) []target {
	var all []target
	for _, u := range l.opts.Servers {
		all = append(all, l.resolve(ctx, u)...)
	}
	slices.SortFunc(all, func(a, b target) int { return cmp.Compare(l.rank(a), l.rank(b)) })
	start := 0
	if prev != nil {
		start = after(all, *prev)
	}
	return append(all[start:], all[:start]...)
}

// rank is t's place in the link's order.
func (l *Link) rank(t target) uint64 { return maphash.String(l.order, t.url+" "+t.addr) }

// after is the index in all of the target after prev: after prev's
// address if the name still resolves to it, else the first address of
// prev's URL, which may be in the answer the name has now.
func after(all []target, prev target) int {
	first := -1
	for i, t := range all {
		if t == prev {
			return (i + 1) % len(all)
		}
		if t.url == prev.url && first < 0 {
			first = i
		}
	}
	return max(first, 0)
}

// resolve is the targets of a server URL: each address its host name
// resolves to, now, so that a changed DNS answer is followed; the URL
// itself when its host is an address, or when the lookup fails, so that
// the dial reports the failure.
func (l *Link) resolve(ctx context.Context, serverURL string) []target {
	u, err := url.Parse(serverURL)
	if err != nil {
		return []target{{url: serverURL}}
	}
	host := u.Hostname()
	if _, err := netip.ParseAddr(host); err == nil || host == "" {
		return []target{{url: serverURL}}
	}
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := l.resolver().LookupNetIP(rctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		l.log.Warn("server name not resolved; dialling it as it is", "server", protocol.RedactURL(serverURL), "err", err)
		return []target{{url: serverURL}}
	}
	_, port, _ := net.SplitHostPort(hostPort(serverURL))
	out := make([]target, len(addrs))
	for i, a := range addrs {
		out[i] = target{url: serverURL, addr: net.JoinHostPort(a.Unmap().String(), port)}
	}
	return out
}

func (l *Link) resolver() *net.Resolver {
	if l.opts.Resolver != nil {
		return l.opts.Resolver
	}
	return net.DefaultResolver
}

// draining reports whether err ends a link the server closed because it
// is draining: close code 1012, service restart. The device moves to
// another server, which is no failure of this one.
func draining(err error) bool { return protocol.CloseStatus(err) == websocket.StatusServiceRestart }
