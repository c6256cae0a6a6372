package protocol

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// livenessOpts are shortened intervals: a ping after a second of silence,
// and two more for its answer, so that a loaded machine does not pass
// for a dead link.
var livenessOpts = ConnOptions{PingInterval: time.Second, PingTimeout: 2 * time.Second}

// One Liveness checks every connection of a server: the link that goes
// dead is closed, and the links that keep answering stay up.
func TestOneLivenessDropsTheDeadLinkAndKeepsTheOthers(t *testing.T) {
	live := NewLiveness()
	t.Cleanup(live.Close)
	opts := livenessOpts
	opts.Liveness = live
	s := newTestServer(t, opts, 0)
	target := strings.TrimPrefix(s.hs.URL, "http://")
	ctx := ctxT(t)

	type link struct {
		proxy  *frameProxy
		client *Conn
		server *peer
	}
	links := make([]link, 3)
	for i := range links {
		proxy := newFrameProxy(t, target)
		c, _, err := Dial(ctx, "ws://"+proxy.addr(), DialOptions{ConnOptions: ConnOptions{PingInterval: -1, Logger: quiet}})
		require.NoError(t, err)
		t.Cleanup(func() { c.CloseNow() })
		links[i] = link{proxy, c, <-s.peers}
		exchange(t, c, "alive")
		go func() {
			var m ServerMessage
			c.Read(ctx, &m) // answers the server's pings while the link lives
		}()
	}
	links[0].proxy.freeze()
	require.Error(t, recv(t, links[0].server.readErr))
	recv(t, links[0].server.conn.Done())

	// The others answered their pings meanwhile, and still do.
	for _, l := range links[1:] {
		select {
		case <-l.server.conn.Done():
			t.Fatal("a link that answers its pings was dropped")
		default:
		}
		l.proxy.waitFor(t, fromServer, opPing)
		l.proxy.waitFor(t, fromClient, opPong)
	}
}

// The client speaks first: it pings after PingInterval of silence, and
// the server, which waits half a PingTimeout longer, hears the ping
// before its own turn comes, so that an idle link carries one ping and
// its pong per interval, never a ping each way.
func TestAnIdleLinkCarriesOneExchangePerInterval(t *testing.T) {
	live := NewLiveness()
	t.Cleanup(live.Close)
	opts := livenessOpts
	opts.Liveness = live
	s := newTestServer(t, opts, 0)
	proxy := newFrameProxy(t, strings.TrimPrefix(s.hs.URL, "http://"))
	ctx := ctxT(t)
	copts := livenessOpts
	copts.Logger = quiet
	c, _, err := Dial(ctx, "ws://"+proxy.addr(), DialOptions{ConnOptions: copts})
	require.NoError(t, err)
	t.Cleanup(func() { c.CloseNow() })
	p := <-s.peers
	go func() {
		var m ServerMessage
		c.Read(ctx, &m)
	}()
	for range 3 {
		proxy.waitFor(t, fromServer, opPong)
		proxy.reset(fromServer, opPong)
	}
	assert.Zero(t, proxy.count(fromServer, opPing), "the server pinged a link whose client pings")
	assert.GreaterOrEqual(t, proxy.count(fromClient, opPing), 3)
	select {
	case <-p.conn.Done():
		t.Fatal("the link was dropped")
	default:
	}
	assert.WithinDuration(t, time.Now(), p.conn.LastHeard(), 2*livenessOpts.PingInterval,
		"the server hears the client's pings")
}

// Directions of a frameProxy's traffic.
const (
	fromClient = 0
	fromServer = 1
)

// WebSocket opcodes the liveness tests count.
const (
	opPing = 0x9
	opPong = 0xa
)

// frameProxy forwards TCP to a target, counts the WebSocket frames each
// way by opcode, and can stop forwarding without closing anything, as a
// dead link does.
type frameProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	counts [2]map[byte]int
	frozen bool
	seen   chan struct{} // a frame was counted
}

func newFrameProxy(t *testing.T, target string) *frameProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &frameProxy{ln: ln, counts: [2]map[byte]int{{}, {}}, seen: make(chan struct{}, 1)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			return
		}
		t.Cleanup(func() { in.Close(); out.Close() })
		go p.pipe(out, in, fromClient)
		go p.pipe(in, out, fromServer)
	}()
	return p
}

func (p *frameProxy) addr() string { return p.ln.Addr().String() }

func (p *frameProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
}

// pipe forwards src to dst, counting the frames after the HTTP upgrade.
func (p *frameProxy) pipe(dst, src net.Conn, dir int) {
	buf := make([]byte, 32<<10)
	var pending []byte // read and not counted yet
	upgraded := false
	for {
		n, err := src.Read(buf)
		if err != nil || p.isFrozen() {
			return // a frozen link swallows what it read and forwards nothing more
		}
		pending = append(pending, buf[:n]...)
		if i := bytes.Index(pending, []byte("\r\n\r\n")); !upgraded && i >= 0 {
			pending, upgraded = pending[i+4:], true
		}
		if upgraded {
			pending = p.tally(dir, pending)
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

// tally counts the whole frames b starts with, sent dir, and returns
// what is left.
func (p *frameProxy) tally(dir int, b []byte) []byte {
	for {
		op, size := frameAt(b)
		if size == 0 {
			return b
		}
		p.mu.Lock()
		p.counts[dir][op]++
		p.mu.Unlock()
		select {
		case p.seen <- struct{}{}:
		default:
		}
		b = b[size:]
	}
}

func (p *frameProxy) isFrozen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen
}

// frameAt is the opcode and length of the frame b starts with, or a
// length of 0 if b does not hold all of it yet.
func frameAt(b []byte) (op byte, n int) {
	if len(b) < 2 {
		return 0, 0
	}
	header, size := 2, uint64(b[1]&0x7f)
	switch size {
	case 126:
		if len(b) < 4 {
			return 0, 0
		}
		header, size = 4, uint64(binary.BigEndian.Uint16(b[2:]))
	case 127:
		if len(b) < 10 {
			return 0, 0
		}
		header, size = 10, binary.BigEndian.Uint64(b[2:])
	}
	if b[1]&0x80 != 0 {
		header += 4
	}
	if uint64(len(b)-header) < size {
		return 0, 0
	}
	return b[0] & 0x0f, header + int(size)
}

func (p *frameProxy) count(dir int, op byte) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[dir][op]
}

func (p *frameProxy) reset(dir int, op byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[dir][op] = 0
}

// waitFor waits until a frame op has gone dir.
func (p *frameProxy) waitFor(t *testing.T, dir int, op byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	for p.count(dir, op) == 0 {
		select {
		case <-p.seen:
		case <-ctx.Done():
			t.Fatalf("no frame %#x went %d within %s", op, dir, testTimeout)
		}
	}
}
