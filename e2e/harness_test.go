package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/server"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/wasmtools/meter"
	"github.com/stretchr/testify/require"
)

// testLogger logs to stderr when E2E_LOG is set, else nowhere.
func testLogger() *slog.Logger {
	if os.Getenv("E2E_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// cluster is one server on loopback and the operator's client for it.
type cluster struct {
	t    testing.TB
	srv  *server.Server
	http *httptest.Server
	api  *api.Client
	data string
	cfg  server.Config // what srv was started with
}

func newCluster(t testing.TB, configure ...func(*server.Config)) *cluster {
	t.Helper()
	data := t.TempDir()
	cfg := server.Config{DataDir: data, Logger: testLogger()}
	if pgtest.StoreOnPostgres(t) { // EDGEAIP_TEST_STORE=postgres
		cfg.Store.URL = pgtest.Shared(t).NewDatabase(t)
	}
	for _, c := range configure {
		c(&cfg)
	}
	srv, err := server.New(context.Background(), cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Shutdown()
		hs.Close()
		srv.Close()
	})
	token, err := os.ReadFile(filepath.Join(data, server.AdminTokenFile))
	require.NoError(t, err)
	return &cluster{t: t, srv: srv, http: hs, data: data, cfg: cfg,
		api: &api.Client{BaseURL: hs.URL, Token: strings.TrimSpace(string(token))}}
}

func (c *cluster) wsURL() string { return "ws" + strings.TrimPrefix(c.http.URL, "http") + "/ws" }

// enroll enrolls id and returns a token file for it.
func (c *cluster) enroll(id string) string {
	c.t.Helper()
	resp, err := c.api.Enroll(context.Background(), api.EnrollRequest{ID: id})
	require.NoError(c.t, err)
	f := filepath.Join(c.t.TempDir(), id+".token")
	require.NoError(c.t, os.WriteFile(f, []byte(resp.Token), 0o600))
	return f
}

// device returns the API's view of id.
func (c *cluster) device(id string) api.Device {
	c.t.Helper()
	var d api.Device
	require.NoError(c.t, c.api.Do(context.Background(), "GET", "/api/devices/"+id, nil, &d))
	return d
}

func (c *cluster) waitOnline(id string, online bool) {
	c.t.Helper()
	require.Eventually(c.t, func() bool { return c.device(id).Online == online },
		20*time.Second, 20*time.Millisecond, "device %s online=%v", id, online)
}

// exec runs one tool on a device through the operator API.
func (c *cluster) exec(id, tool string, params map[string]any, timeout time.Duration) api.CommandResponse {
	c.t.Helper()
	resp, err := c.api.Command(context.Background(), id, api.CommandRequest{
		Actions: []protocol.Command{{ToolName: tool, Parameters: params}},
		Timeout: timeout.String(),
	})
	require.NoError(c.t, err)
	return resp
}

// refusal runs one tool on a device through the operator API and requires
// admission to refuse it, before anything is sent: it returns the
// problems.
func (c *cluster) refusal(id, tool string, params map[string]any) []api.Problem {
	c.t.Helper()
	_, err := c.api.Command(context.Background(), id, api.CommandRequest{Actions: []protocol.Command{{ToolName: tool, Parameters: params}}})
	var se *api.StatusError
	require.ErrorAs(c.t, err, &se)
	require.Equal(c.t, http.StatusBadRequest, se.Code, se.Message)
	return se.Problems
}

// agentOptions adjust an agent's Config before it starts.
type agentOption func(*agent.Config)

// startAgent runs an agent for id until the test ends, with the stock tools
// and the fixtures of testdata/tools (namespace "fixtures"), and waits until
// it is online.
func (c *cluster) startAgent(id, tokenFile string, opts ...agentOption) *runningAgent {
	c.t.Helper()
	cfg := agent.Config{
		ID:                id,
		ServerURL:         c.wsURL(),
		TokenFile:         tokenFile,
		ToolDirs:          []string{"stock=" + testenv.StockToolsDir(c.t), "fixtures=" + testenv.TestdataTools()},
		DataDir:           c.t.TempDir(),
		CompileCacheDir:   sharedCompileCache(c.t),
		HeartbeatInterval: 100 * time.Millisecond,
		// Tests stop their agents with tools still running.
		ShutdownGrace: 500 * time.Millisecond,
		Logger:        testLogger(),
	}
	for _, o := range opts {
		o(&cfg)
	}
	ra := runAgent(c.t, cfg)
	c.waitOnline(id, true)
	return ra
}

// runningAgent is an agent running in this process.
type runningAgent struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func runAgent(t testing.TB, cfg agent.Config) *runningAgent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := agent.New(ctx, cfg)
	require.NoError(t, err)
	ra := &runningAgent{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(ra.done)
		a.Run(ctx)
		a.Close(context.Background())
	}()
	t.Cleanup(ra.stop)
	return ra
}

func (ra *runningAgent) stop() {
	ra.cancel()
	<-ra.done
}

// compileCache is where every test agent keeps compiled modules, across
// test runs: wazero keys its entries by module and by its own version.
// It is one per cost model, since an agent removes the directories of
// other cost models from its cache: test runs of two trees with different
// models at once, on one machine, would remove each other's while their
// agents used it.
var compileCache = filepath.Join(os.TempDir(), fmt.Sprintf("edgeaip-e2e-compile-cache-%d-%s",
	os.Getuid(), strings.ReplaceAll(meter.CostModelVersion, "/", "-")))

// sharedCompileCache is the compile cache every test agent shares, so
// that the stock tools are compiled once. Agents do not prune a cache
// they share.
func sharedCompileCache(t testing.TB) string {
	require.NoError(t, os.MkdirAll(compileCache, 0o700))
	return compileCache
}

func withMounts(mounts ...sandbox.Mount) agentOption {
	return func(c *agent.Config) { c.Mounts = mounts }
}

func withLimits(l sandbox.Limits) agentOption {
	return func(c *agent.Config) { c.Limits = l }
}

// watchLog makes the agent's logger report each message to seen, unless
// seen is full.
func watchLog(seen chan<- string) agentOption {
	return onLog(func(msg string) {
		select {
		case seen <- msg:
		default:
		}
	})
}

// whenLogged makes the agent close done the first time it logs msg.
func whenLogged(msg string, done chan<- struct{}) agentOption {
	var once sync.Once
	return onLog(func(m string) {
		if m == msg {
			once.Do(func() { close(done) })
		}
	})
}

// onLog makes the agent's logger call notify with each message.
func onLog(notify func(msg string)) agentOption {
	return onRecord(func(r slog.Record) { notify(r.Message) })
}

// onRecord makes the agent's logger call notify with each record.
func onRecord(notify func(slog.Record)) agentOption {
	return func(c *agent.Config) {
		c.Logger = slog.New(&notifyHandler{Handler: c.Logger.Handler(), notify: notify})
	}
}

type notifyHandler struct {
	slog.Handler
	notify func(slog.Record)
}

// Enabled is true at every level, so that debug messages are seen even
// when they are not logged.
func (h *notifyHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *notifyHandler) Handle(ctx context.Context, r slog.Record) error {
	h.notify(r)
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h *notifyHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &notifyHandler{Handler: h.Handler.WithAttrs(as), notify: h.notify}
}

func (h *notifyHandler) WithGroup(name string) slog.Handler {
	return &notifyHandler{Handler: h.Handler.WithGroup(name), notify: h.notify}
}

// cutProxy forwards TCP to a target and can cut every connection at once,
// as a flaky network would.
type cutProxy struct {
	ln   net.Listener
	held atomic.Bool // connections are refused until release
	// budget, once armed (cutAfter), is what the target may still send
	// before every connection is cut.
	budget atomic.Int64
	armed  atomic.Bool
	mu     sync.Mutex
	target string                    // where new connections go: retarget
	conns  map[*proxiedConn]struct{} // open ones
}

// proxiedConn is one connection through the proxy: the client's end and
// the target's.
type proxiedConn struct{ in, out net.Conn }

func newCutProxy(t testing.TB, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: target, conns: map[*proxiedConn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.held.Load() {
			in.Close()
			continue
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		out, err := net.Dial("tcp", target)
		if err != nil {
			in.Close()
			continue
		}
		pc := &proxiedConn{in: in, out: out}
		p.mu.Lock()
		p.conns[pc] = struct{}{}
		p.mu.Unlock()
		go func() { io.Copy(out, in); p.closed(pc) }()
		go func() { io.Copy(in, budgetReader{p, out}); p.closed(pc) }()
	}
}

// closed ends pc once either side has closed it.
func (p *cutProxy) closed(pc *proxiedConn) {
	p.mu.Lock()
	delete(p.conns, pc)
	p.mu.Unlock()
	pc.in.Close()
	pc.out.Close()
}

// retarget sends new connections to target, as a load balancer does once
// its first target has died.
func (p *cutProxy) retarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

// refuse stops the proxy taking new connections, as a network that is
// gone would.
func (p *cutProxy) refuse() { p.ln.Close() }

// hold refuses new connections until release, as a network that is gone
// for a while would.
func (p *cutProxy) hold() { p.held.Store(true) }

func (p *cutProxy) release() { p.held.Store(false) }

// open counts the connections open through the proxy.
func (p *cutProxy) open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// cutAfter cuts every connection once the targets have sent n bytes
// more through the proxy, as a link lost mid-download would be.
func (p *cutProxy) cutAfter(n int64) {
	p.budget.Store(n)
	p.armed.Store(true)
}

// budgetReader reads from the target, within the proxy's budget once it
// is armed; past it the proxy cuts.
type budgetReader struct {
	p   *cutProxy
	src net.Conn
}

func (b budgetReader) Read(buf []byte) (int, error) {
	n, err := b.src.Read(buf)
	if n > 0 && b.p.armed.Load() && b.p.budget.Add(-int64(n)) <= 0 && b.p.armed.CompareAndSwap(true, false) {
		b.p.cut()
		return 0, net.ErrClosed
	}
	return n, err
}

// cut closes every open connection through the proxy and says how many
// there were.
func (p *cutProxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pc := range p.conns {
		pc.in.Close()
		pc.out.Close()
	}
	n := len(p.conns)
	clear(p.conns)
	return n
}
