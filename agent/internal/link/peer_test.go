package link

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/logtest"
	"github.com/edgeaip/edgeaip/agent/internal/outbox"
	"github.com/edgeaip/edgeaip/agent/internal/reply"
	"github.com/edgeaip/edgeaip/agent/internal/token"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/require"
)

// peer is the server end of links, speaking as much AIP as a link needs
// to stay up: it acks REGISTER, then reads until the link ends. The real
// server is exercised end to end in e2e/.
type peer struct {
	srv      *httptest.Server
	attempts atomic.Int64 // upgrade requests, registered or not
	links    chan *peerLink

	mu   sync.Mutex
	open []*peerLink
}

// peerLink is one registered link.
type peerLink struct {
	conn *protocol.Conn
	host string // the upgrade's Host header
	at   time.Time
}

// newPeer starts a peer on addr, e.g. 127.0.0.2:0.
func newPeer(t *testing.T, addr string) *peer {
	t.Helper()
	return startPeer(t, addr, (*httptest.Server).Start)
}

// newTLSPeer starts a peer on addr serving wss://, with httptest's
// certificate, which names example.com, 127.0.0.1 and ::1.
func newTLSPeer(t *testing.T, addr string) *peer {
	t.Helper()
	return startPeer(t, addr, (*httptest.Server).StartTLS)
}

func startPeer(t *testing.T, addr string, start func(*httptest.Server)) *peer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	p := &peer{links: make(chan *peerLink, 1024)}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.Listener.Close()
	p.srv.Listener = ln
	start(p.srv)
	t.Cleanup(p.kill)
	return p
}

func (p *peer) url() string { return "ws" + strings.TrimPrefix(p.srv.URL, "http") + "/ws" }

func (p *peer) serve(w http.ResponseWriter, r *http.Request) {
	p.attempts.Add(1)
	conn, err := protocol.Accept(w, r, protocol.ConnOptions{Logger: logtest.Quiet})
	if err != nil {
		return
	}
	defer conn.CloseNow()
	var reg protocol.ClientMessage
	if err := conn.Read(r.Context(), &reg); err != nil {
		return
	}
	ack := &protocol.ServerMessage{Type: protocol.ServerHeartbeat, Status: protocol.StatusOK, ResponseID: reg.RequestID}
	if err := conn.Send(r.Context(), ack); err != nil {
		return
	}
	l := &peerLink{conn: conn, host: r.Host, at: time.Now()}
	p.mu.Lock()
	p.open = append(p.open, l)
	p.mu.Unlock()
	p.links <- l
	for {
		var m protocol.ClientMessage
		if err := conn.Read(context.WithoutCancel(r.Context()), &m); err != nil {
			return
		}
	}
}

// next waits for the next link registered here.
func (p *peer) next(t *testing.T) *peerLink {
	t.Helper()
	select {
	case l := <-p.links:
		return l
	case <-time.After(testenv.Slowdown * 20 * time.Second):
		t.Fatalf("no link registered at %s", p.srv.URL)
		return nil
	}
}

// closeAll closes every link registered here with code and reason.
func (p *peer) closeAll(code int, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.open {
		go l.conn.Close(websocket.StatusCode(code), reason)
	}
	p.open = nil
}

// kill stops the peer as a killed server stops: its port refuses, its
// links drop without a closing handshake.
func (p *peer) kill() {
	p.srv.Listener.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.open {
		l.conn.CloseNow()
	}
	p.open = nil
}

// deadURL is a ws:// URL on which nothing listens.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return "ws://" + addr + "/ws"
}

// startLink runs a link of device dev to servers until the test ends, and
// returns what it logs.
func startLink(t *testing.T, dev string, servers []string, adjust func(*Options)) *logtest.Recorder {
	t.Helper()
	logs := &logtest.Recorder{}
	runLink(t, dev, servers, "", openOutbox(t, dev, logs.Logger()), logs.Logger(), adjust)
	return logs
}

// openOutbox opens an outbox for dev until the test ends.
func openOutbox(t testing.TB, dev string, log *slog.Logger) *outbox.Outbox {
	t.Helper()
	ob, _, err := outbox.Open(filepath.Join(t.TempDir(), "outbox", dev+".journal"), outbox.OSFS{}, protocol.CBOR,
		config.OutboxLimits{MaxBytes: 16 << 20, MaxAge: 7 * 24 * time.Hour}, log)
	require.NoError(t, err)
	t.Cleanup(func() { ob.Close() })
	return ob
}

// runLink runs a link of device dev to servers, with the token in
// tokenFile if any, delivering the results of ob, logging to log, until
// the test ends or stop is called, which returns once the link stopped.
func runLink(t testing.TB, dev string, servers []string, tokenFile string, ob *outbox.Outbox, log *slog.Logger, adjust func(*Options)) (stop func()) {
	t.Helper()
	tokens, err := token.Open(tokenFile, t.TempDir(), log)
	require.NoError(t, err)
	opts := Options{
		DeviceID: dev, Servers: servers, Tokens: tokens, Wire: protocol.CBOR,
		Describe: func() protocol.SystemInfo { return protocol.SystemInfo{} },
		Commands: func(*protocol.ServerMessage) {}, Cancel: func(string, string) {},
	}
	if adjust != nil {
		adjust(&opts)
	}
	l := New(opts, ob, reply.Cap{Enc: protocol.CBOR, Max: protocol.DefaultMaxFrameBytes}, log)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	stop = sync.OnceFunc(func() {
		cancel()
		<-done
	})
	t.Cleanup(stop)
	return stop
}
