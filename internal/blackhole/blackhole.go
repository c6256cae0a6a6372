// Package blackhole is a TCP proxy on loopback that a test can make stop
// forwarding without closing anything, as a network that drops every
// packet does: each end's writes pile up unanswered, and nothing tells
// either end that the link is dead. Forwarding again delivers what
// waited, as TCP's retransmissions do once a partition heals. It needs
// no root and no network namespace, and a cut takes effect at once.
package blackhole

import (
	"net"
	"sync"
	"testing"
)

// Proxy forwards every connection made to it to one target.
type Proxy struct {
	ln      net.Listener
	network string // of target: tcp, or unix for a socket's path
	target  string

	mu sync.Mutex
	// open is closed while the proxy forwards; a cut replaces it with a
	// new one, open until the cut heals.
	open   chan struct{}
	closed chan struct{} // closed by Close
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// Start runs a proxy on 127.0.0.1 to target (HOST:PORT) for t, closed
// when t ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	return StartTo(t, "tcp", target)
}

// StartTo runs a proxy on 127.0.0.1 to target on network ("tcp", or
// "unix" for a socket's path, such as a test PostgreSQL's, which listens
// on no port) for t, closed when t ends.
func StartTo(t testing.TB, network, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("blackhole: listen: %v", err)
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{ln: ln, network: network, target: target, open: open, closed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is where the proxy listens: HOST:PORT.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut stops forwarding, in both directions, on every connection, those
// made from now on included: nothing is closed, and nothing is lost.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default: // cut already
	}
}

// Heal forwards again, starting with what waited during the cut.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() {
	p.mu.Lock()
	select {
	case <-p.closed:
		p.mu.Unlock()
		return
	default:
	}
	close(p.closed)
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// accept serves each connection made to the proxy until Close.
func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial(p.network, p.target)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, up) {
			return
		}
		p.wg.Add(2)
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

// track notes conns, to be closed by Close; false if it came first.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.closed:
		for _, c := range conns {
			c.Close()
		}
		return false
	default:
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies from src to dst, holding what it read while the proxy is
// cut; an end that closes is closed on the other side only once the cut
// heals, as its FIN would arrive.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer p.untrack(dst, src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if !p.forwarding() {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// forwarding waits while the proxy is cut, and reports whether it still
// runs.
func (p *Proxy) forwarding() bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	select {
	case <-open:
		return true
	case <-p.closed:
		return false
	}
}

// untrack closes conns and forgets them.
func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		c.Close()
		delete(p.conns, c)
	}
}
