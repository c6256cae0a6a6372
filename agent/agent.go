package agent

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/agent/internal/executor"
	"github.com/edgeaip/edgeaip/agent/internal/link"
	"github.com/edgeaip/edgeaip/agent/internal/mcpproxy"
	"github.com/edgeaip/edgeaip/agent/internal/mcpserve"
	"github.com/edgeaip/edgeaip/agent/internal/outbox"
	"github.com/edgeaip/edgeaip/agent/internal/reply"
	"github.com/edgeaip/edgeaip/agent/internal/selfupdate"
	"github.com/edgeaip/edgeaip/agent/internal/token"
	"github.com/edgeaip/edgeaip/agent/internal/toolbox"
	"github.com/edgeaip/edgeaip/internal/privatedir"
	"github.com/edgeaip/edgeaip/internal/version"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
)

// Config configures an Agent; package config reads it from a file and
// the command line.
type Config = config.Config

// The MCP servers an agent proxies, in the shape of UFO's mcp.yaml.
type (
	MCPConfig       = config.MCPConfig
	MCPServerConfig = config.MCPServerConfig
)

// MCPServe configures the agent's own MCP endpoint.
type MCPServe = config.MCPServe

// MCPStdio is the type of an MCP server the agent spawns, speaking on
// stdin and stdout.
const MCPStdio = config.MCPStdio

// flushTimeout bounds how long shutdown waits for the outbox to drain.
const flushTimeout = 5 * time.Second

// Agent is a device agent: its parts, wired. Build it with New, Run it
// once, then Close it.
type Agent struct {
	cfg   Config
	log   *slog.Logger
	sb    *sandbox.Sandbox
	tools *toolbox.Toolbox
	// startTools are the tools loaded at start, whose small ones Run
	// prepares before it first registers.
	startTools []computer.Tool
	mcp        *mcpproxy.Pool
	computers  *computer.Manager
	router     *computer.Router
	outbox     *outbox.Outbox
	executor   *executor.Executor
	link       *link.Link
	inventory  chan struct{} // the tool inventory changed: the link registers again
	// local serves the device's tools to applications on it; nil unless
	// mcp_serve.listen is set. localTools is signalled when they change.
	local      *mcpserve.Server
	localTools chan struct{}
	// updater updates the agent itself; nil unless release keys are
	// configured. restart is closed, once, when an update asks the agent
	// to end for its supervisor to start the next one.
	updater     *selfupdate.Updater
	restart     chan struct{}
	restartOnce sync.Once

	// stopWatch ends the watch for tools that fail to instrument, which
	// watching waits for.
	stopWatch context.CancelFunc
	watching  sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// New loads the token, the tools and the outbox. It fails on a config that
// cannot work, such as a missing token file; a module that is refused is
// logged, reported at registration and left out instead. It does not wait
// for modules to be instrumented for fuel, which on a first start takes a
// quarter of a second per Go tool: one that turns out not to instrument is
// refused then, and the inventory sent again without it. Commands that
// were running when the agent last died are answered as failed, from the
// outbox, once it links up.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	return newAgent(ctx, cfg, outbox.OSFS{})
}

// newAgent is New with the outbox kept on fs.
func newAgent(ctx context.Context, cfg Config, fs outbox.FS) (*Agent, error) {
	cfg.SetDefaults()
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	log := cfg.Logger.With("device", cfg.ID)
	tokens, err := token.Open(cfg.TokenFile, cfg.DataDir, log)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	tc, err := clientTLS(cfg, log)
	if err != nil {
		return nil, err
	}
	sb, err := sandbox.New(ctx, sandbox.NewConfig().WithLimits(cfg.Limits).
		WithMaxConcurrentCalls(cfg.MaxConcurrentCalls).
		WithMaxReservedMemory(cfg.MaxReservedMemory).
		WithUnloadAfter(cfg.UnloadAfter).
		WithReproducible(cfg.Reproducible).
		WithCacheDir(cmp.Or(cfg.CompileCacheDir, filepath.Join(cfg.DataDir, "compile-cache"))).
		WithCacheLimits(cfg.CompileCacheLimits.MaxAge, cfg.CompileCacheLimits.MaxBytes).
		WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a := &Agent{cfg: cfg, sb: sb, log: log, inventory: make(chan struct{}, 1), localTools: make(chan struct{}, 1), restart: make(chan struct{})}
	if err := a.init(ctx, tokens, tc, fs); err != nil {
		a.Close(ctx)
		return nil, err
	}
	return a, nil
}

// init builds the parts: the tools and the Computers that hold them, the
// outbox, the executor that runs commands and the link that carries them,
// dialling the server with tokens and, over TLS, tc.
func (a *Agent) init(ctx context.Context, tokens link.Tokens, tc *tls.Config, fs outbox.FS) error {
	cap := reply.Cap{Enc: a.cfg.Wire, Max: a.cfg.Conn.MaxFrameBytes}
	a.tools = toolbox.New(a.sb, a.cfg, a.log, a.inventoryChanged)
	tools, err := a.tools.Load(ctx)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.mcp = mcpproxy.NewPool(cap, version.Version(), a.log, a.inventoryChanged)
	a.computers = computer.NewManager(a.cfg.MCP, tools, a.mcp, a.log)
	a.computers.AddMeta(a.tools.MetaTools(a.computers)...)
	if len(a.cfg.ReleaseKeys) > 0 {
		a.updater = selfupdate.NewUpdater(a.cfg.DataDir, a.cfg.ReleaseKeys, a.cfg.Supervised, a.endForUpdate, a.inventoryChanged, a.log)
		a.computers.AddMeta(a.updater.MetaTools()...)
	}
	a.router = computer.NewRouter(a.computers, a.log)
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	a.stopWatch = stopWatch
	a.watching.Go(func() { a.tools.RefuseUninstrumented(watchCtx, tools, a.computers) })
	a.startTools = tools

	ob, interrupted, err := outbox.Open(filepath.Join(a.cfg.DataDir, "outbox", a.cfg.ID+".journal"), fs, a.cfg.Wire, a.cfg.Outbox, a.log)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.outbox = ob
	privatedir.Warn(a.cfg.DataDir, a.log)
	// Pruned only now, under the outbox's lock, which keeps a second
	// agent of this device off the data dir and its cache.
	a.tools.PruneCache()
	a.executor = executor.New(executor.Options{DeviceID: a.cfg.ID, MaxConcurrent: a.cfg.MaxConcurrentCommands, Grace: a.cfg.ShutdownGrace,
		Tell: func(ctx context.Context, m *protocol.ClientMessage) { a.link.Tell(ctx, m) }},
		a.outbox, a.router, cap, a.log)
	a.executor.ReportInterrupted(interrupted)
	a.link = link.New(link.Options{
		DeviceID: a.cfg.ID, Servers: a.cfg.Servers(), Resolver: a.cfg.Resolver, Tokens: tokens, TLS: tc, Wire: a.cfg.Wire, Conn: a.cfg.Conn,
		Heartbeat: a.cfg.HeartbeatInterval, Describe: a.systemInfo, Commands: a.executor.Admit, Cancel: a.executor.Cancel, Inventory: a.inventory,
		Registered: a.registered,
	}, a.outbox, cap, a.log)
	return a.listenLocal()
}

// listenLocal binds the agent's own MCP endpoint, if mcp_serve asks for
// one, so that an address taken fails the start.
func (a *Agent) listenLocal() error {
	if a.cfg.MCPServe.Listen == "" {
		return nil
	}
	token, err := mcpserve.Token(a.cfg.MCPServe.TokenFile)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.local, err = mcpserve.Listen(mcpserve.Options{
		Listen: a.cfg.MCPServe.Listen, Token: token, Version: version.Version(), Tools: a.localToolList,
		Run: a.executor.RunLocal, MaxSessions: a.cfg.MCPServe.MaxSessions, Log: a.log.With("part", "mcp_serve"),
	})
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}

// localToolList is what the local MCP endpoint serves: the tools of the
// default Computer, as the device registers them, but its meta tools
// (list_tools, install_tool, stage_module, apply_revision), which are the
// server's to use.
func (a *Agent) localToolList() []protocol.MCPToolInfo {
	c, err := a.computers.Get(context.Background(), computer.Target{})
	if err != nil {
		a.log.Warn("the MCP endpoint serves no tools", "err", err)
		return nil
	}
	return c.ListTools("", "", true)
}

// serveLocal serves the local MCP endpoint, if there is one, until ctx
// ends, with the tools as they change.
func (a *Agent) serveLocal(ctx context.Context) {
	if a.local == nil {
		return
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-a.localTools:
				a.local.Refresh()
			}
		}
	}()
	a.local.Serve(ctx)
}

// Run keeps the device linked to the server and serves commands until ctx
// ends; it reconnects with exponential backoff and full jitter, forever.
// When ctx ends it shuts down gracefully: it takes no new commands, lets
// those in flight finish within ShutdownGrace and cancels the rest, and
// delivers the outbox while the link is up. Run may be called once.
func (a *Agent) Run(ctx context.Context) error {
	// The default Computer starts its MCP servers now, so that the first
	// registration carries their tools.
	if _, err := a.computers.Get(ctx, computer.Target{}); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	if d := a.cfg.PrepareBeforeRegister; d > 0 {
		prepCtx, stopPrep := context.WithTimeout(ctx, d)
		a.tools.PrepareSmall(prepCtx, a.startTools)
		stopPrep()
	}
	linkCtx, stopLink := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLink()
	localCtx, stopLocal := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLocal()
	var wg sync.WaitGroup
	wg.Go(func() { a.serveLocal(localCtx) })
	wg.Go(func() { a.link.Run(linkCtx) })
	wg.Go(func() { every(linkCtx, min(a.cfg.Outbox.MaxAge/4, time.Hour), a.pruneOutbox) })
	wg.Go(func() { every(linkCtx, computer.IdleAfter/4, a.computers.EvictIdle) })
	restart := false
	select {
	case <-ctx.Done():
	case <-a.restart:
		restart = true
	}
	a.executor.Shutdown()
	stopLocal()
	a.link.Flush(flushTimeout)
	stopLink()
	wg.Wait()
	if restart {
		return ErrRestart
	}
	return nil
}

// ErrRestart is what Run returns when an update asked the agent to end,
// once its commands are answered, for its supervisor to start the agent
// the update named: aip-agent exits with RestartExitCode.
var ErrRestart = errors.New("agent: ending for its supervisor to start the next agent")

// RestartExitCode is the status aip-agent exits with on ErrRestart.
const RestartExitCode = selfupdate.RestartExitCode

// endForUpdate makes Run end with ErrRestart.
func (a *Agent) endForUpdate() { a.restartOnce.Do(func() { close(a.restart) }) }

// registered is told each time the device registered.
func (a *Agent) registered() {
	if a.updater != nil {
		a.updater.Registered()
	}
}

// Close stops the MCP servers and frees the sandbox and the outbox. Call
// it after Run returns; calls after the first do nothing.
func (a *Agent) Close(ctx context.Context) error {
	a.closeOnce.Do(func() {
		if a.stopWatch != nil {
			a.stopWatch()
			a.watching.Wait()
		}
		if a.local != nil {
			a.local.Close()
		}
		if a.mcp != nil {
			a.mcp.Close()
		}
		if a.outbox != nil {
			a.closeErr = a.outbox.Close()
		}
		a.closeErr = errors.Join(a.closeErr, a.sb.Close(ctx))
	})
	return a.closeErr
}

// inventoryChanged makes the link send the new inventory, and the local
// MCP endpoint serve it.
func (a *Agent) inventoryChanged() {
	for _, ch := range []chan struct{}{a.inventory, a.localTools} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// pruneOutbox drops aged-out results.
func (a *Agent) pruneOutbox(now time.Time) {
	if err := a.outbox.Prune(now); err != nil {
		a.log.Error("outbox not pruned", "err", err)
	}
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func(now time.Time)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			f(now)
		}
	}
}
