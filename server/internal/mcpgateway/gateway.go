package mcpgateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/internal/mcpsessions"
	"github.com/edgeaip/edgeaip/internal/version"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/metrics"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// Config is what the gateway needs of the server: the parts it calls,
// and its bounds.
type Config struct {
	// Tasks runs and follows what the tools ask.
	Tasks *tasks.FrontDoor
	// InScope holds callers to their scopes.
	InScope *inscope.Checker
	// Devices are the enrolled devices, as the command path reads them.
	Devices *inscope.Enrolled
	// Store holds the devices and tasks the tools read.
	Store *store.Store
	// Auth says when a caller is revoked.
	Auth *identity.Authority
	// Registry holds the devices linked here, whose tools are served
	// directly.
	Registry *dispatch.Registry
	// Metrics count sessions and calls.
	Metrics *metrics.Metrics
	// Logger receives the gateway's logs.
	Logger *slog.Logger
	// MaxMessageBytes bounds an MCP message: the frame cap, which bounds
	// every call.
	MaxMessageBytes int64
	// MaxPlanBytes bounds a plan given to dispatch_plan.
	MaxPlanBytes int
	// Options tune the gateway.
	Options Options
}

// New is a gateway over cfg's parts, with cfg.Options' defaults for what
// they leave zero. Serve it at /mcp behind the access policy, which puts
// the caller in each request's context; run RefreshViews, and Close it
// as the server stops.
func New(cfg Config) *Gateway {
	cfg.Options.setDefaults()
	log := cfg.Logger.With("surface", "mcp")
	sessions := mcpsessions.New(mcpsessions.Config{MaxPerOwner: cfg.Options.MaxSessionsPerIdentity, MaxTotal: cfg.Options.MaxSessions,
		Evicted: func(b mcpsessions.Bound) { cfg.Metrics.MCPSessionEvicted(string(b)) },
		Refused: func(b mcpsessions.Bound) { cfg.Metrics.MCPSessionRefused(string(b)) }, Log: log})
	return &Gateway{cfg: cfg, log: log, stop: make(chan struct{}), sessions: sessions,
		views: map[string]*view{}, changed: make(chan struct{}, 1)}
}

// Gateway holds one MCP server per identity: what a client sees is its
// identity's tools, which its role and scope decide, and the direct tools
// of the devices in its scope change as they come and go.
type Gateway struct {
	cfg  Config
	log  *slog.Logger
	stop chan struct{} // closed by Close
	once sync.Once     // closes stop

	sessions *mcpsessions.Table // every view's, by identity

	mu    sync.Mutex
	views map[string]*view // by viewKey

	changed chan struct{} // devices came, went or changed their tools
	offline offlineExpiry // refreshes the views as offline devices' tools go
}

// view is what one identity (with one role and scope) sees.
type view struct {
	g      *Gateway
	mcp    *mcpserver.MCPServer
	http   *mcpserver.StreamableHTTPServer
	serve  http.Handler // http, within the bounds of sessions
	limits *callLimits

	listed sync.Once // the tools are listed once the view is made

	// tokens are the ids of the identity's tokens that used the view,
	// under g.mu: it is dropped once they are all revoked.
	tokens map[string]struct{}

	// clients are the view's registered sessions, by id: a task's
	// notifications go to the session that asked for it.
	clients sync.Map

	mu     sync.Mutex
	who    *identity.Caller
	served []mcp.Tool              // the tools last served, to tell a change
	direct map[string]directTarget // DEVICE__TOOL names
}

// viewKey tells views apart: an identity added again under the same name
// with another role or scope gets a view of its own.
func viewKey(c *identity.Caller) string {
	return c.Name + "\x00" + c.Role.String() + "\x00" + c.Scope.String()
}

// ServeHTTP is /mcp: the caller's view serves the request, which ends
// when the caller is revoked, as the other open surfaces do, or the
// gateway closes: a stream of notifications, or a call still running
// (which is then cancelled, saying why).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// No call carries more than a frame holds: refuse a larger message
	// before reading it, and cut one whose length was not said there.
	limit := g.cfg.MaxMessageBytes
	if r.ContentLength > limit {
		tooLarge(w, fmt.Sprintf("an MCP message of %d bytes is larger than the %d-byte frame cap, which bounds every call", r.ContentLength, limit))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	who := identity.CallerFrom(r)
	revoked, stop := g.cfg.Auth.Watch(who)
	defer stop()
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	go func() {
		select {
		case <-revoked:
			cancel(fmt.Errorf("identity %q was revoked", who.Name))
		case <-g.stop:
			cancel(tasks.ErrShuttingDown)
		case <-ctx.Done():
		}
	}()
	g.view(ctx, who).serve.ServeHTTP(w, r.WithContext(ctx))
}

// tooLarge answers 413 with msg, as the API answers an error.
func tooLarge(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	json.NewEncoder(w).Encode(api.Error{Error: msg})
}

// view is c's view, made, with its tools, on first use; DevicesChanged
// keeps the tools up to date from then on.
func (g *Gateway) view(ctx context.Context, c *identity.Caller) *view {
	g.mu.Lock()
	v := g.views[viewKey(c)]
	if v == nil {
		v = g.newView(c)
		g.views[viewKey(c)] = v
	}
	v.tokens[c.TokenID] = struct{}{}
	g.mu.Unlock()
	v.listed.Do(func() { v.refresh(ctx) })
	return v
}

// Revoked drops the views of an identity revoked, or whose tokens that
// used them all are, and ends their sessions: otherwise a view would be
// kept, with its MCP server and sessions, for as long as the server runs.
func (g *Gateway) Revoked(rev identity.Revocation) {
	g.mu.Lock()
	var dropped []*view
	for key, v := range g.views {
		for id := range v.tokens {
			if rev.Covers(v.who.Name, id) {
				delete(v.tokens, id)
			}
		}
		if len(v.tokens) == 0 {
			delete(g.views, key)
			dropped = append(dropped, v)
		}
	}
	g.mu.Unlock()
	g.shutdown(dropped, "its identity was revoked")
	if len(dropped) > 0 {
		g.log.Info("MCP views dropped: their identity was revoked", "identity", rev.Identity, "views", len(dropped))
	}
}

func (g *Gateway) newView(c *identity.Caller) *view {
	v := &view{g: g, who: c, tokens: map[string]struct{}{}, limits: newCallLimits(g.cfg.Options.CallsPerMinute, g.cfg.Options.CallsAtOnce)}
	hooks := &mcpserver.Hooks{}
	hooks.AddOnRegisterSession(func(_ context.Context, s mcpserver.ClientSession) {
		g.cfg.Metrics.MCPSessions(1)
		v.clients.Store(s.SessionID(), s)
	})
	hooks.AddOnUnregisterSession(func(_ context.Context, s mcpserver.ClientSession) {
		g.cfg.Metrics.MCPSessions(-1)
		v.clients.Delete(s.SessionID())
	})
	v.mcp = mcpserver.NewMCPServer("aip-server", version.Version(),
		mcpserver.WithToolCapabilities(true),
		// Served by taskMethods, over our tasks, not by mcp-go.
		mcpserver.WithTaskCapabilities(true, true, true),
		mcpserver.WithExtensions(map[string]any{tasksExtension: map[string]any{}}),
		// A page of tools/list, with a cursor to the next: 50 devices with
		// --mcp-direct-tools 100 listed 114 tools, 28 KB, in one answer.
		mcpserver.WithPaginationLimit(g.cfg.Options.ToolsPageSize),
		mcpserver.WithInstructions(mcpInstructions),
		mcpserver.WithToolHandlerMiddleware(v.counted),
		mcpserver.WithHooks(hooks))
	// The endpoint needs a Bearer token: DNS rebinding, which the
	// localhost check guards against, leans on servers that need none,
	// and the check would refuse a proxy in front on the same host.
	opts := []mcpserver.StreamableHTTPOption{mcpserver.WithDisableLocalhostProtection(true),
		mcpserver.WithStreamableHTTPLogger(g.log), mcpserver.WithHTTPContextFunc(withBaseURL)}
	if ttl := g.cfg.Options.SessionIdleTTL; ttl > 0 {
		// A client listening on its stream is there even when nothing
		// happens: a ping on the stream every third of the TTL keeps its
		// session, which a write touches, and finds a stream whose client
		// is gone.
		opts = append(opts, mcpserver.WithSessionIdleTTL(ttl), mcpserver.WithHeartbeatInterval(ttl/3))
	}
	v.http = mcpserver.NewStreamableHTTPServer(v.mcp, opts...)
	v.serve = g.sessions.Guard(c.Name, hooks, v.taskMethods(v.http))
	return v
}

// Close ends the requests being served, saying the server shuts down,
// and every view's sessions, and its idle sweeper; RefreshViews returns.
func (g *Gateway) Close() {
	g.once.Do(func() { close(g.stop) })
	g.offline.stop()
	g.mu.Lock()
	views := slices.Collect(maps.Values(g.views))
	clear(g.views)
	g.mu.Unlock()
	g.shutdown(views, "the server stops")
}

// shutdown ends views' sessions and their idle sweepers; why says why.
func (g *Gateway) shutdown(views []*view, why string) {
	for _, v := range views {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := v.http.Shutdown(ctx); err != nil {
			g.log.Warn("MCP sessions not all closed", "identity", v.who.Name, "why", why, "err", err)
		}
		cancel()
	}
}

// mcpInstructions tell a model what it is talking to.
const mcpInstructions = "edgeaip: a fleet of devices (kiosks, edge boards), each running sandboxed tools. " +
	"list_devices, then list_device_tools to see a device's tools and their input schemas; call_device_tool runs one, " +
	"dispatch_plan runs a plan of steps on a device or on every device with some labels; get_task and cancel_task follow and stop tasks. " +
	"Tools named DEVICE__TOOL call one device's tool directly. data_collection tools only read; action tools may change the device. " +
	"Every call is recorded and audited under your identity."

// refresh serves the tools v's identity should see now, if they changed:
// clients hear of it by notifications/tools/list_changed.
func (v *view) refresh(ctx context.Context) {
	v.mu.Lock()
	defer v.mu.Unlock()
	tools := v.fixedTools()
	direct, expires, err := v.g.directTools(ctx, v.who)
	if err != nil {
		v.g.log.Warn("direct tools not listed", "identity", v.who.Name, "err", err)
	}
	v.g.offline.after(expires, v.g.DevicesChanged)
	names := make([]mcp.Tool, 0, len(tools)+len(direct))
	v.direct = map[string]directTarget{}
	for _, t := range tools {
		names = append(names, t.Tool)
	}
	for _, d := range direct {
		v.direct[d.tool.Name] = d
		names = append(names, d.tool)
		tools = append(tools, mcpserver.ServerTool{Tool: d.tool, Handler: v.callDeviceTool})
	}
	for i := range tools {
		tools[i].Tool = v.withTaskSupport(tools[i].Tool)
		names[i] = tools[i].Tool
	}
	if v.served != nil && reflect.DeepEqual(names, v.served) {
		return
	}
	v.served = names
	v.mcp.SetTools(tools...)
}

// DevicesChanged is called when a device is enrolled or revoked,
// registers, updates its tools or its link drops: views are refreshed in
// the background (RefreshViews). Enrolling one can move a scope past
// DirectTools.
func (g *Gateway) DevicesChanged() {
	select {
	case g.changed <- struct{}{}:
	default:
	}
}

// RefreshViews refreshes every view whenever devices change, until the
// gateway closes.
func (g *Gateway) RefreshViews() {
	for {
		select {
		case <-g.stop:
			return
		case <-g.changed:
		}
		g.RefreshAll(context.Background())
	}
}

// RefreshAll refreshes every view now.
func (g *Gateway) RefreshAll(ctx context.Context) {
	g.mu.Lock()
	views := slices.Collect(maps.Values(g.views))
	g.mu.Unlock()
	for _, v := range views {
		v.refresh(ctx)
	}
}

// Views counts the views the gateway keeps of identity: one for each
// role and scope it was seen with, while a token that used it works.
func (g *Gateway) Views(identity string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, v := range g.views {
		if v.who.Name == identity {
			n++
		}
	}
	return n
}

type baseURLKey struct{}

// withBaseURL keeps the URL the client reached the server by, for links
// to tasks in answers.
func withBaseURL(ctx context.Context, r *http.Request) context.Context {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return context.WithValue(ctx, baseURLKey{}, scheme+"://"+r.Host)
}

// taskURL is where task id can be read whole, as the client reached the
// server.
func taskURL(ctx context.Context, id string) string {
	base, _ := ctx.Value(baseURLKey{}).(string)
	return base + "/api/tasks/" + id
}
