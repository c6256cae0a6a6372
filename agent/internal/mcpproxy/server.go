// Package mcpproxy proxies the MCP servers an agent's config names: it
// spawns a stdio server or connects to an HTTP one, keeps it running,
// lists its tools, follows tools/list_changed, and calls its tools with a
// deadline. It publishes each server's tools to whoever subscribes (a
// Computer's registry), and holds no reference to them: agent/RATIONALE.md,
// "MCP proxy", says why it is built this way.
package mcpproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/backoff"
	"github.com/edgeaip/edgeaip/agent/internal/reply"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Timeouts of the MCP proxy.
const (
	// mcpStartTimeout bounds initialize and each tools/list.
	mcpStartTimeout = 30 * time.Second
	// mcpDiscoverTimeout bounds mcp-go's server/discover probe. Servers of
	// protocol 2025-11-25 that ignore unknown methods cost this much at
	// every start, so it is short.
	mcpDiscoverTimeout = time.Second
	// mcpStopGrace is how long a stdio server gets to exit after its stdin
	// closes, and again after SIGTERM, before SIGKILL.
	mcpStopGrace = 2 * time.Second
	// mcpStableAfter is how long a server must stay up for its restart
	// backoff to start over.
	mcpStableAfter = time.Minute
)

// mcpEnvKeys are the variables a stdio server inherits from the agent; its
// config's env adds to them. Everything else in the agent's environment
// stays out of the server's reach.
var mcpEnvKeys = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "TZ", "TMPDIR",
	"DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR"}

// Server is one proxied MCP server. It keeps the server running: it
// spawns a stdio server or connects to an HTTP one, discovers its tools and
// publishes them to its subscribers, follows tools/list_changed, and
// restarts a server that dies, with backoff, forever.
type Server struct {
	cfg     config.MCPServerConfig
	log     *slog.Logger
	cap     reply.Cap // no result may be larger than a frame of the link
	version string    // the agent's, given to the server at initialize
	// onChange is told when the tool list changed, so that the agent sends
	// its inventory again.
	onChange func()

	started   chan struct{} // closed once the first start attempt has ended
	startOnce sync.Once
	resync    chan struct{}      // a tools/list_changed to act on
	cancel    context.CancelFunc // stops run
	stopped   chan struct{}      // closed when run has returned

	mu    sync.Mutex
	conn  *mcpConn // nil while down
	tools []mcp.Tool
	subs  []*Subscription

	statusMu sync.Mutex
	down     error // why the server is not running; nil while it runs
}

func newServer(cfg config.MCPServerConfig, cap reply.Cap, version string, log *slog.Logger, onChange func()) *Server {
	return &Server{
		cfg:      cfg,
		cap:      cap,
		version:  version,
		log:      log.With("mcp_server", cfg.Namespace),
		onChange: onChange,
		started:  make(chan struct{}),
		resync:   make(chan struct{}, 1),
		down:     fmt.Errorf("MCP server %q is starting", cfg.Namespace),
	}
}

// Namespace is the namespace of the server's tools.
func (s *Server) Namespace() string { return s.cfg.Namespace }

// Subscription is one subscriber of a server's tools, which it gets under
// one tool type.
type Subscription struct {
	server   *Server
	toolType protocol.ToolType
	publish  func([]*Tool)
}

// Subscribe has publish given the server's tools under toolType, now if
// they are known, and whenever they change. publish is called with the
// server's lock held: it must not call back into the server.
func (s *Server) Subscribe(toolType protocol.ToolType, publish func([]*Tool)) *Subscription {
	sub := &Subscription{server: s, toolType: toolType, publish: publish}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = append(s.subs, sub)
	if s.tools != nil {
		publish(s.wrap(s.tools, toolType))
	}
	return sub
}

// Server is the server subscribed to.
func (sub *Subscription) Server() *Server { return sub.server }

// Cancel ends the subscription. A server started for its one subscriber
// (reset: true) stops, and Cancel waits until it has.
func (sub *Subscription) Cancel() {
	s := sub.server
	if s.cfg.Reset {
		s.stop()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = slices.DeleteFunc(s.subs, func(x *Subscription) bool { return x == sub })
}

func (s *Server) wrap(defs []mcp.Tool, toolType protocol.ToolType) []*Tool {
	out := make([]*Tool, len(defs))
	for i, d := range defs {
		out[i] = newTool(s, d, toolType)
	}
	return out
}

// stop stops the server and waits until it has.
func (s *Server) stop() {
	s.cancel()
	<-s.stopped
}

// WaitStarted waits until the first start attempt has ended, or ctx.
func (s *Server) WaitStarted(ctx context.Context) {
	select {
	case <-s.started:
	case <-ctx.Done():
	}
}

// Down says why the server is not running, or nil if it is.
func (s *Server) Down() error {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	return s.down
}

func (s *Server) setDown(err error) {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	s.down = err
}

// run keeps the server up until ctx ends. ctx must live as long as the
// server: mcp-go ties the transport, and the requests the server sends us,
// to the context given to Start.
func (s *Server) run(ctx context.Context) {
	b := backoff.Backoff{Base: 500 * time.Millisecond, Max: 30 * time.Second}
	defer s.startOnce.Do(func() { close(s.started) })
	for {
		err := s.session(ctx, &b)
		if ctx.Err() != nil {
			return
		}
		// Why it is down is known before the first attempt counts as over.
		s.setDown(fmt.Errorf("MCP server %q is not running: %w; restarting it", s.cfg.Namespace, err))
		s.startOnce.Do(func() { close(s.started) })
		wait := b.Next()
		s.log.Warn("MCP server down; restarting", "err", err, "in", wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// session runs one connection to the server, from start to its end, and
// says why it ended.
func (s *Server) session(ctx context.Context, b *backoff.Backoff) error {
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.close()
	// Up before its tools are published: a subscriber may call one as
	// soon as it has it.
	s.mu.Lock()
	s.conn = conn
	s.mu.Unlock()
	s.setDown(nil)
	defer func() {
		s.setDown(fmt.Errorf("MCP server %q is restarting", s.cfg.Namespace))
		s.mu.Lock()
		s.conn = nil
		s.mu.Unlock()
	}()
	if err := s.syncTools(ctx, conn); err != nil {
		return err
	}
	s.startOnce.Do(func() { close(s.started) })
	s.log.Info("MCP server running", "type", s.cfg.Type)

	up := time.Now()
	defer func() {
		if time.Since(up) >= mcpStableAfter {
			b.Reset()
		}
	}()
	for {
		select {
		case <-conn.dead:
			return conn.cause
		case <-ctx.Done():
			return ctx.Err()
		case <-s.resync:
			if err := s.syncTools(ctx, conn); err != nil {
				s.log.Warn("tools/list after list_changed failed", "err", err)
				conn.die(err)
			}
		}
	}
}

// connect starts the server and initializes an MCP session with it.
func (s *Server) connect(ctx context.Context) (*mcpConn, error) {
	var conn *mcpConn
	var tr transport.Interface
	var err error
	if s.cfg.Type == config.MCPStdio {
		conn, tr, err = s.spawn()
	} else {
		conn = &mcpConn{dead: make(chan struct{})}
		// Servers of protocol 2025-11-25, the npm ones among them, send
		// tools/list_changed only on the standalone GET stream, which this
		// (deprecated) option opens; it keeps the session on that protocol.
		tr, err = transport.NewStreamableHTTP(s.cfg.URL, transport.WithContinuousListening(), transport.WithHTTPLogger(s.log))
	}
	if err != nil {
		return nil, err
	}
	conn.client = client.NewClient(tr, client.WithDiscoverTimeout(mcpDiscoverTimeout))
	if err := conn.client.Start(ctx); err != nil {
		conn.close()
		return nil, fmt.Errorf("start: %w", err)
	}
	// Notifications reach handlers only after Start.
	conn.client.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationToolsListChanged {
			select {
			case s.resync <- struct{}{}:
			default:
			}
		}
	})
	ictx, cancel := context.WithTimeout(ctx, mcpStartTimeout)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = mcp.Implementation{Name: "aip-agent", Version: s.version}
	if _, err := conn.client.Initialize(ictx, req); err != nil {
		conn.close()
		return nil, fmt.Errorf("initialize: %w", s.withExit(conn, err))
	}
	return conn, nil
}

// spawn starts a stdio server in its own process group, with pipes the
// agent owns, so that it can tell exactly when the server exits and stop
// the children it started too (a browser, say).
func (s *Server) spawn() (*mcpConn, transport.Interface, error) {
	cmd := exec.Command(s.cfg.Command, s.cfg.StartArgs...)
	cmd.Dir = s.cfg.Cwd
	cmd.Env = s.environ()
	setProcessGroup(cmd)
	var pipes [3][2]*os.File // stdin, stdout, stderr: {read end, write end}
	for i := range pipes {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(pipes[:i])
			return nil, nil, fmt.Errorf("pipe: %w", err)
		}
		pipes[i] = [2]*os.File{r, w}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pipes[0][0], pipes[1][1], pipes[2][1]
	if err := cmd.Start(); err != nil {
		closeAll(pipes[:])
		return nil, nil, fmt.Errorf("start %s: %w", s.cfg.Command, err)
	}
	for _, f := range []*os.File{pipes[0][0], pipes[1][1], pipes[2][1]} {
		f.Close() // the child's ends
	}
	conn := &mcpConn{proc: cmd, exited: make(chan struct{}), dead: make(chan struct{})}
	go s.logStderr(pipes[2][0])
	go func() {
		err := cmd.Wait()
		if err == nil {
			err = errors.New("exit status 0")
		}
		// The exit is the cause, even for a call that saw the pipe close
		// first and is waiting on exited to say why.
		conn.die(fmt.Errorf("process exited: %w", err))
		close(conn.exited)
	}()
	s.log.Info("MCP server started", "pid", cmd.Process.Pid, "command", s.cfg.Command)
	return conn, transport.NewIO(closeOnEOF{pipes[1][0]}, pipes[0][1], nil), nil
}

func closeAll(pipes [][2]*os.File) {
	for _, p := range pipes {
		p[0].Close()
		p[1].Close()
	}
}

// environ is the server's environment: mcpEnvKeys from the agent's, then
// the config's env.
func (s *Server) environ() []string {
	var env []string
	for _, k := range mcpEnvKeys {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.cfg.Env)) {
		env = append(env, k+"="+s.cfg.Env[k])
	}
	return env
}

// closeOnEOF closes our end of a pipe once the server's end is closed and
// everything in it read: the reader, not the one who stops the server,
// knows when nothing is left.
type closeOnEOF struct{ f *os.File }

func (c closeOnEOF) Read(p []byte) (int, error) {
	n, err := c.f.Read(p)
	if err != nil {
		c.f.Close()
	}
	return n, err
}

// logStderr copies the server's stderr to the agent's log, line by line,
// until the pipe closes. It never stops reading early: a full pipe would
// block the server.
func (s *Server) logStderr(f *os.File) {
	defer f.Close()
	br := bufio.NewReaderSize(f, 4096)
	for {
		line, _, err := br.ReadLine()
		if len(line) > 0 {
			s.log.Info("MCP server stderr", "line", string(line))
		}
		if err != nil {
			return
		}
	}
}

// syncTools lists every page of the server's tools and registers them in
// each bound Computer.
func (s *Server) syncTools(ctx context.Context, conn *mcpConn) error {
	lctx, cancel := context.WithTimeout(ctx, mcpStartTimeout)
	defer cancel()
	res, err := conn.client.ListTools(lctx, mcp.ListToolsRequest{})
	if err != nil {
		return fmt.Errorf("tools/list: %w", s.withExit(conn, err))
	}
	tools := res.Tools
	if tools == nil {
		tools = []mcp.Tool{}
	}
	s.mu.Lock()
	changed := !sameTools(s.tools, tools)
	s.tools = tools
	for _, sub := range s.subs {
		sub.publish(s.wrap(tools, sub.toolType))
	}
	s.mu.Unlock()
	s.log.Info("MCP tools synced", "count", len(tools), "changed", changed)
	if changed {
		s.onChange()
	}
	return nil
}

func sameTools(a, b []mcp.Tool) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return a != nil && errA == nil && errB == nil && string(ja) == string(jb)
}

// call runs one tool with the server's call timeout.
func (s *Server) call(ctx context.Context, name string, params map[string]any) protocol.Result {
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	if conn == nil {
		if err := s.Down(); err != nil {
			return failure(err)
		}
		return failure(fmt.Errorf("MCP server %q is restarting", s.cfg.Namespace))
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if params == nil {
		params = map[string]any{} // servers refuse "arguments": null
	}
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, params
	res, err := conn.client.CallTool(ctx, req)
	if err != nil {
		return failure(s.callError(ctx, conn, name, err))
	}
	return s.capped(name, toolResult(res))
}

// capped fails r if it alone is larger than a frame of the link, which it
// could never go out on: a full-page screenshot, say.
func (s *Server) capped(name string, r protocol.Result) protocol.Result {
	n, err := s.cap.Size(r)
	if err == nil && n <= s.cap.Max {
		return r
	}
	f := s.cap.TooBig(r, n, err)
	f.Error = fmt.Sprintf("tool %q of MCP server %q: %s", name, s.cfg.Namespace, f.Error)
	return f
}

// callError explains a call that got no tool result: a deadline, a server
// that died under it, or an error the server answered with.
func (s *Server) callError(ctx context.Context, conn *mcpConn, name string, err error) error {
	prefix := fmt.Sprintf("tool %q of MCP server %q", name, s.cfg.Namespace)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: no answer within %s", prefix, s.cfg.Timeout)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", prefix, context.Cause(ctx))
	}
	var te *transport.Error
	if !errors.As(err, &te) {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	return fmt.Errorf("%s: the server failed during the call: %w; restarting it", prefix, s.withExit(conn, err))
}

// withExit turns a transport error into why the server went away: for a
// stdio server, its exit status once the process is reaped. It marks the
// connection dead, so that the server restarts.
func (s *Server) withExit(conn *mcpConn, err error) error {
	var te *transport.Error
	if !errors.As(err, &te) {
		return err
	}
	if conn.proc != nil {
		waitClosed(conn.exited, mcpStopGrace)
	}
	conn.die(fmt.Errorf("link lost: %w", err))
	return conn.cause
}

// mcpConn is one running connection to an MCP server.
type mcpConn struct {
	client *client.Client
	// For a stdio server: its process; nil over HTTP.
	proc   *exec.Cmd
	exited chan struct{} // closed once proc is reaped

	dead  chan struct{} // closed when the connection is unusable
	cause error         // why; set before dead closes
	once  sync.Once
}

func (c *mcpConn) die(cause error) {
	c.once.Do(func() {
		c.cause = cause
		close(c.dead)
	})
}

// close ends the session. A stdio server gets its stdin closed, then
// SIGTERM, then SIGKILL, each after mcpStopGrace, sent to its whole
// process group.
func (c *mcpConn) close() {
	c.die(errors.New("closed"))
	if c.client != nil {
		c.client.Close()
	}
	if c.proc == nil {
		return
	}
	if !waitClosed(c.exited, mcpStopGrace) {
		signalGroup(c.proc.Process, syscall.SIGTERM)
		if !waitClosed(c.exited, mcpStopGrace) {
			signalGroup(c.proc.Process, syscall.SIGKILL)
			<-c.exited
		}
	}
	// Children the server left behind go with their group, and with them
	// the last writers of its stdout and stderr, whose readers then close
	// our ends.
	signalGroup(c.proc.Process, syscall.SIGKILL)
}

// waitClosed waits up to d for ch to close and says whether it did.
func waitClosed(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

func failure(err error) protocol.Result {
	return protocol.Result{Status: protocol.ResultFailure, Error: err.Error()}
}
