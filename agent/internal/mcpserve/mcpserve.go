// Package mcpserve is the agent's own MCP endpoint: it serves the
// device's tools (its wasm tools and the tools of the MCP servers it
// proxies) to applications on the device, over Streamable HTTP at /mcp,
// with mcp-go's server. Each call is run by the executor as a command
// from the server is, under the same policies, limits and fuel, and
// reported to the server for its audit log. Clients present a Bearer
// token, which the agent keeps in a file.
package mcpserve

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/agent/internal/executor"
	"github.com/edgeaip/edgeaip/internal/authlimit"
	"github.com/edgeaip/edgeaip/internal/mcpsessions"
	"github.com/edgeaip/edgeaip/internal/mcptool"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Path is where the endpoint serves MCP.
const Path = "/mcp"

// Options are what the endpoint needs of the agent.
type Options struct {
	// Listen is HOST:PORT.
	Listen string
	// Token is what a client must present as its Bearer token.
	Token string
	// Version is the agent's, reported to clients.
	Version string
	// Tools lists the tools to serve: the default Computer's, meta tools
	// left out.
	Tools func() []protocol.MCPToolInfo
	// Run runs one call.
	Run func(context.Context, executor.LocalCall) protocol.Result
	// MaxResultBytes bounds a result's JSON in an answer; 0: no bound.
	MaxResultBytes int
	// MaxSessions bounds the sessions the endpoint holds; 0:
	// DefaultMaxSessions.
	MaxSessions int
	Log         *slog.Logger
}

// DefaultMaxSessions is Options.MaxSessions' default: the applications of
// one device, each with a session or a few, and room for those that
// never end theirs.
const DefaultMaxSessions = 64

// Server is the endpoint. Listen makes one, bound; Serve serves it.
type Server struct {
	opts Options
	ln   net.Listener
	mcp  *server.MCPServer
	http *http.Server

	sessions  *mcpsessions.Table
	authLimit *authlimit.Limiter

	mu      sync.Mutex
	served  []protocol.MCPToolInfo          // what Refresh last served, to tell a change
	byName  map[string]protocol.MCPToolInfo // the tool each MCP name stands for
	callers callers
}

// Listen binds the endpoint's address, so that an address taken fails the
// agent's start.
func Listen(opts Options) (*Server, error) {
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("mcp_serve: %w", err)
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	s := &Server{opts: opts, ln: ln, byName: map[string]protocol.MCPToolInfo{},
		sessions:  mcpsessions.New(mcpsessions.Config{MaxTotal: opts.MaxSessions, Log: opts.Log}),
		authLimit: authlimit.NewLimiter(nil, time.Now, opts.Log)}
	hooks := &server.Hooks{}
	hooks.AddAfterInitialize(s.callers.remember)
	s.mcp = server.NewMCPServer("aip-agent", opts.Version, server.WithToolCapabilities(true), server.WithHooks(hooks),
		server.WithInstructions("The tools of this device, run in its sandbox under the operator's policies and limits. Each call is reported to the fleet's audit log."))
	mux := http.NewServeMux()
	// One token, one owner: the bound is the endpoint's.
	endpoint := s.sessions.Guard("", hooks, server.NewStreamableHTTPServer(s.mcp, server.WithStreamableHTTPLogger(opts.Log)))
	mux.Handle(Path, s.authenticate(endpoint))
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(opts.Log.Handler(), slog.LevelWarn)}
	if ip := net.ParseIP(strings.Trim(hostOf(opts.Listen), "[]")); ip == nil || !ip.IsLoopback() {
		opts.Log.Warn("the MCP endpoint listens beyond this device, as mcp_serve.listen says", "listen", ln.Addr().String())
	}
	return s, nil
}

// Addr is the address the endpoint listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve serves until ctx ends, then stops within a second: calls still
// running by then are the executor's to finish or cancel.
func (s *Server) Serve(ctx context.Context) {
	s.Refresh()
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if s.http.Shutdown(sctx) != nil {
			s.http.Close()
		}
	})
	defer stop()
	s.opts.Log.Info("MCP endpoint serving the device's tools", "url", "http://"+s.ln.Addr().String()+Path)
	if err := s.http.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.opts.Log.Error("MCP endpoint stopped", "err", err)
	}
}

// Close stops the endpoint at once, served or not.
func (s *Server) Close() {
	s.http.Close()
	s.ln.Close()
}

// authenticate lets through requests that present the token. A source
// that failed too often is refused with 429 for a while, the right token
// included, as the server refuses one (internal/authlimit).
func (s *Server) authenticate(next http.Handler) http.Handler {
	want := []byte("Bearer " + s.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		src := s.authLimit.Source(r)
		if wait := s.authLimit.Blocked(src); wait > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(wait))
			http.Error(w, fmt.Sprintf("too many failed authentications from this address: try again in %d s", wait), http.StatusTooManyRequests)
			return
		}
		got := r.Header.Get("Authorization")
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			if got != "" {
				s.authLimit.Failed(src, "mcp_serve", got)
			}
			const msg = "unauthorized: present the token of mcp_serve.token_file as a Bearer token"
			w.Header().Set("WWW-Authenticate", `Bearer realm="aip-agent", error="invalid_token", error_description="`+msg+`"`)
			http.Error(w, msg, http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Refresh serves the tools as they are now; clients hear of a change by
// notifications/tools/list_changed.
func (s *Server) Refresh() {
	infos := s.opts.Tools()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.served != nil && reflect.DeepEqual(infos, s.served) {
		return
	}
	s.served = infos
	named := make([]mcptool.Named, len(infos))
	for i, info := range infos {
		named[i] = mcptool.Named{Base: info.ToolName, Key: info.ToolKey}
	}
	s.byName = map[string]protocol.MCPToolInfo{}
	tools := make([]server.ServerTool, len(infos))
	for i, name := range mcptool.Names(named) {
		s.byName[name] = infos[i]
		tools[i] = server.ServerTool{Tool: mcptool.Tool(name, infos[i]), Handler: s.call}
	}
	s.mcp.SetTools(tools...)
}

// call runs one tool call.
func (s *Server) call(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s.mu.Lock()
	info, ok := s.byName[req.Params.Name]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no tool %q on this device", req.Params.Name)
	}
	args, ok := req.Params.Arguments.(map[string]any)
	if !ok && req.Params.Arguments != nil {
		return mcp.NewToolResultError(fmt.Sprintf("arguments of %q: want an object, got %T", req.Params.Name, req.Params.Arguments)), nil
	}
	call := executor.LocalCall{
		Action: protocol.Command{ToolName: info.ToolName, ToolType: info.ToolType, Parameters: args},
		Caller: s.callers.of(ctx, req.Header),
	}
	res := s.runWithProgress(ctx, mcptool.NewProgress(ctx, req), info.ToolName, call)
	return mcptool.Result(info.ToolName, res, mcptool.Cut{MaxBytes: s.opts.MaxResultBytes}), nil
}

// runWithProgress runs call, telling its client, if it asked for
// progress, that it started and, every mcptool.ProgressEvery, that it
// still runs, as the server's gateway does: a client whose timeout
// resets on progress keeps waiting for a long call.
func (s *Server) runWithProgress(ctx context.Context, p *mcptool.Progress, tool string, call executor.LocalCall) protocol.Result {
	done := make(chan protocol.Result, 1)
	go func() { done <- s.opts.Run(ctx, call) }()
	p.Send(tool + " started")
	tick := time.NewTicker(mcptool.ProgressEvery)
	defer tick.Stop()
	started := time.Now()
	for {
		select {
		case res := <-done:
			return res
		case now := <-tick.C:
			p.Running(now, started)
		}
	}
}

// hostOf is the host of a HOST:PORT address, "" if it has none.
func hostOf(addr string) string {
	host, _, _ := net.SplitHostPort(addr)
	return host
}
