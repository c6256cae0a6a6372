package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/agent/internal/logtest"
	"github.com/edgeaip/edgeaip/agent/internal/mcpproxy/mcptest"
	"github.com/edgeaip/edgeaip/agent/internal/outbox"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// testPeer is the server end of the link, scripted by the test: it accepts
// the agent's connections on a real WebSocket, acks REGISTER and results as
// our server does, and lets the test send exact message sequences, such as
// a COMMAND sent twice. The real server is exercised end to end in e2e/.
type testPeer struct {
	srv   *httptest.Server
	links chan *peerLink
	// noAck keeps the peer from acknowledging results and local calls, as
	// a server that failed to record them does.
	noAck atomic.Bool
	// early is sent before the ack of REGISTER, as a server that counts a
	// device online before it acks may do.
	early atomic.Pointer[protocol.ServerMessage]
	// hangUp closes each link right after the ack of REGISTER, as a server
	// that refuses what the device sends next would.
	hangUp atomic.Bool
}

// peerLink is one registered connection of the agent.
type peerLink struct {
	conn       *protocol.Conn
	upgrade    *http.Request // the upgrade request, as the peer got it
	register   protocol.ClientMessage
	msgs       chan protocol.ClientMessage // all but heartbeats
	heartbeats atomic.Int64
	stalled    atomic.Bool // stop reading, pings included, as a dead peer does
	closed     chan struct{}
	readErr    error // why the link ended; set before closed closes
	// preparing are the notices of a tool's preparation that results
	// passed over, in order.
	preparing []protocol.Preparing
}

func newTestPeer(t testing.TB) *testPeer {
	p := &testPeer{links: make(chan *peerLink, 16)}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *testPeer) url() string { return "ws" + strings.TrimPrefix(p.srv.URL, "http") + "/ws" }

func (p *testPeer) serve(w http.ResponseWriter, r *http.Request) {
	conn, err := protocol.Accept(w, r, protocol.ConnOptions{Logger: logtest.Quiet})
	if err != nil {
		return
	}
	defer conn.CloseNow()
	ctx := r.Context()
	l := &peerLink{conn: conn, upgrade: r.Clone(context.Background()), msgs: make(chan protocol.ClientMessage, 256), closed: make(chan struct{})}
	if err := conn.Read(ctx, &l.register); err != nil {
		return
	}
	if m := p.early.Load(); m != nil {
		if err := conn.Send(ctx, m); err != nil {
			return
		}
	}
	ack := &protocol.ServerMessage{Type: protocol.ServerHeartbeat, Status: protocol.StatusOK, ResponseID: l.register.RequestID}
	if err := conn.Send(ctx, ack); err != nil {
		return
	}
	p.links <- l
	defer close(l.closed)
	if p.hangUp.Load() {
		conn.Close(websocket.StatusMessageTooBig, "too big")
		return
	}
	for {
		if l.stalled.Load() {
			<-ctx.Done()
			return
		}
		var m protocol.ClientMessage
		if l.readErr = conn.Read(ctx, &m); l.readErr != nil {
			return
		}
		switch {
		case m.Type == protocol.ClientHeartbeat:
			l.heartbeats.Add(1)
			continue
		case (m.Type == protocol.ClientCommandResults || m.Type == protocol.ClientLocalCall) && !p.noAck.Load():
			ack := &protocol.ServerMessage{Type: protocol.ServerHeartbeat, Status: protocol.StatusOK, ResponseID: m.RequestID}
			if l.readErr = conn.Send(ctx, ack); l.readErr != nil {
				return
			}
		}
		l.msgs <- m
	}
}

// next waits for the agent's next registered link.
func (p *testPeer) next(t testing.TB) *peerLink {
	t.Helper()
	select {
	case l := <-p.links:
		return l
	case <-time.After(testenv.Slowdown * 20 * time.Second):
		t.Fatal("the agent did not link up")
		return nil
	}
}

// linkedOn starts an agent speaking wire to a new testPeer, and returns
// its link.
func linkedOn(t *testing.T, wire protocol.Encoding) *peerLink {
	t.Helper()
	p := newTestPeer(t)
	cfg := agentConfig(t, p.url())
	cfg.Wire = wire
	startAgent(t, cfg)
	return p.next(t)
}

// newCommand is a COMMAND with a fresh response_id.
func newCommand(session string, actions ...protocol.Command) *protocol.ServerMessage {
	return &protocol.ServerMessage{Type: protocol.ServerCommand, Status: protocol.StatusContinue,
		SessionID: session, ResponseID: uuid.NewString(), Actions: actions}
}

// send sends m to the agent.
func (l *peerLink) send(t testing.TB, m *protocol.ServerMessage) {
	t.Helper()
	require.NoError(t, l.conn.Send(context.Background(), m))
}

// next waits for the next message other than a heartbeat.
func (l *peerLink) next(t testing.TB) protocol.ClientMessage {
	t.Helper()
	select {
	case m := <-l.msgs:
		return m
	case <-time.After(testenv.Slowdown * 20 * time.Second):
		t.Fatal("no message from the agent")
		return protocol.ClientMessage{}
	}
}

// results waits for the results of responseID, failing on any other
// message but the notices that its tool is being prepared, which it
// keeps in l.preparing.
func (l *peerLink) results(t testing.TB, responseID string) []protocol.Result {
	t.Helper()
	for {
		m := l.next(t)
		if m.Type == protocol.ClientPreparing && m.PrevResponseID == responseID {
			l.preparing = append(l.preparing, *m.Preparing)
			continue
		}
		require.Equal(t, protocol.ClientCommandResults, m.Type, "%+v", m)
		require.Equal(t, responseID, m.PrevResponseID)
		return m.ActionResults
	}
}

// quiet checks that the agent sends nothing but heartbeats for d.
func (l *peerLink) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case m := <-l.msgs:
		t.Fatalf("unexpected message from the agent: %+v", m)
	case <-time.After(d):
	}
}

// testAgent is an Agent running in the test, linked to a testPeer.
type testAgent struct {
	*Agent
	logs   *logtest.Recorder
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// agentConfig is a config for dev-1 linked to url, with the wasm fixtures
// (namespace "fixtures") and the test MCP server (namespace "helper").
func agentConfig(t testing.TB, url string) Config {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(token, []byte("aipd_test\n"), 0o600))
	return Config{
		ID: "dev-1", ServerURL: url, TokenFile: token, DataDir: filepath.Join(dir, "data"),
		ToolDirs:          []string{"fixtures=" + testenv.TestdataTools()},
		MCP:               defaultAction(mcptest.Stdio(t, "helper")),
		HeartbeatInterval: time.Second,
	}
}

func startAgent(t *testing.T, cfg Config) *testAgent {
	t.Helper()
	return startAgentOn(t, cfg, outbox.OSFS{})
}

// startAgentOn starts an agent that keeps its outbox on fs.
func startAgentOn(t *testing.T, cfg Config, fs outbox.FS) *testAgent {
	t.Helper()
	logs := &logtest.Recorder{}
	cfg.Logger = logs.Logger()
	a, err := newAgent(context.Background(), cfg, fs)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ta := &testAgent{Agent: a, logs: logs, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(ta.done)
		a.Run(ctx)
	}()
	t.Cleanup(ta.stop)
	return ta
}

// stop shuts the agent down gracefully and waits for it.
func (ta *testAgent) stop() {
	ta.once.Do(func() {
		ta.cancel()
		<-ta.done
		ta.Close(context.Background())
	})
}
