package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
)

// Agent is a device agent. Build it with New, Run it once, then Close it.
type Agent struct {
	cfg       Config
	token     string
	log       *slog.Logger
	sb        *sandbox.Sandbox
	loader    *toolLoader
	mcp       *mcpPool
	computers *ComputerManager
	router    *Router
	outbox    *outbox
	outboxFS  outboxFS
	frames    frameCap // what one message on the link may take

	refusedMu sync.Mutex
	refused   []refusal // modules refused since start, reported at registration

	// stopWatch ends refuseUninstrumented, which watching waits for.
	stopWatch context.CancelFunc
	watching  sync.WaitGroup

	slots    chan struct{} // one per command allowed to run
	sessions sessionQueues

	// admitMu orders the admission of commands against the start of
	// shutdown, so that no job is added once shutdown waits for them.
	admitMu    sync.Mutex
	draining   chan struct{} // closed when shutdown begins
	jobs       sync.WaitGroup
	jobsCtx    context.Context // ends when shutdown gives up waiting
	cancelJobs context.CancelCauseFunc

	linkMu     sync.Mutex
	link       *protocol.Conn // the registered link; nil while down
	linkNum    uint64         // numbers each link, for the outbox to tell what went out on which
	serverAcks atomic.Bool    // the server has acknowledged results
	wake       chan struct{}  // results wait to be delivered
	inventory  chan struct{}  // the tool inventory changed

	closeOnce sync.Once
	closeErr  error
}

// errRestarted is the failure of a command that was running when the agent
// died. It is reported, never run again.
var errRestarted = errors.New("agent restarted while the command ran")

// New loads the token, the tools and the outbox. It fails on a config that
// cannot work, such as a missing token file; a module that is refused is
// logged, reported at registration and left out instead. It does not wait
// for modules to be instrumented for fuel, which on a first start takes a
// quarter of a second per Go tool: one that turns out not to instrument is
// refused then, and the inventory sent again without it. Commands that
// were running when the agent last died are answered as failed, from the
// outbox, once it links up.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	return newAgent(ctx, cfg, osFS{})
}

// newAgent is New with the outbox kept on fs.
func newAgent(ctx context.Context, cfg Config, fs outboxFS) (*Agent, error) {
	cfg.setDefaults()
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	token, err := readToken(cfg.TokenFile)
	if err != nil {
		return nil, err
	}
	sb, err := sandbox.New(ctx, sandbox.NewConfig().WithLimits(cfg.Limits).
		WithMaxConcurrentCalls(cfg.MaxConcurrentCalls).
		WithMaxReservedMemory(cfg.MaxReservedMemory).
		WithUnloadAfter(cfg.UnloadAfter).
		WithReproducible(cfg.Reproducible).
		WithCacheDir(cmp.Or(cfg.CompileCacheDir, filepath.Join(cfg.DataDir, "compile-cache"))))
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a := &Agent{
		cfg: cfg, token: token, sb: sb, log: cfg.Logger.With("device", cfg.ID),
		loader:    newToolLoader(sb, cfg),
		outboxFS:  fs,
		frames:    frameCap{enc: cfg.Wire, max: cfg.Conn.MaxFrameBytes},
		slots:     make(chan struct{}, cfg.MaxConcurrentCommands),
		draining:  make(chan struct{}),
		wake:      make(chan struct{}, 1),
		inventory: make(chan struct{}, 1),
	}
	a.jobsCtx, a.cancelJobs = context.WithCancelCause(context.Background())
	if err := a.init(ctx); err != nil {
		a.Close(ctx)
		return nil, err
	}
	return a, nil
}

func (a *Agent) init(ctx context.Context) error {
	tools, err := a.loadTools(ctx)
	if err != nil {
		return err
	}
	a.mcp = newMCPPool(a.frames, a.log, a.inventoryChanged)
	a.computers = newComputerManager(a.cfg.MCP, tools, []tool{&installTool{agent: a}}, a.mcp, a.log)
	a.router = &Router{computers: a.computers, log: a.log}
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	a.stopWatch = stopWatch
	a.watching.Go(func() { a.refuseUninstrumented(watchCtx, tools) })
	ob, interrupted, err := openOutbox(filepath.Join(a.cfg.DataDir, "outbox", a.cfg.ID+".journal"), a.outboxFS, a.cfg.Outbox, a.log)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.outbox = ob
	// Pruned only now, under the outbox's lock, which keeps a second
	// agent of this device off the data dir and its cache.
	a.pruneCache()
	for _, c := range interrupted {
		log := a.commandLog(c.SessionID, c.ResponseID, c.CallIDs)
		log.Warn("command was running when the agent died; reporting it as failed")
		reply := a.commandResults(c.SessionID, c.ResponseID, c.Status, protocol.FailAll(c.CallIDs, errRestarted.Error()))
		if err := a.outbox.complete(reply); err != nil {
			log.Error("failure not recorded; delivering it from memory", "err", err)
		}
	}
	return nil
}

func readToken(path string) (string, error) {
	if path == "" {
		return "", errors.New("agent: token file is required")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("agent: token file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("agent: token file %s is empty", path)
	}
	return token, nil
}

func newToolLoader(sb *sandbox.Sandbox, cfg Config) *toolLoader {
	keys := signature.NewKeyRing(cfg.TrustedKeys...)
	require := keys.Len() > 0
	if cfg.RequireSigned != nil {
		require = *cfg.RequireSigned
	}
	return &toolLoader{
		sb:        sb,
		verifier:  signature.Verifier{Keys: keys, RequireSigned: require},
		policies:  sandbox.Policies{Default: sandbox.Policy{Dirs: cfg.Mounts, Env: cfg.AllowEnv}, ByName: cfg.Policies},
		lookupEnv: os.LookupEnv,
	}
}

// loadTools loads the tool dirs, then the tools deployed to this device:
// the wasm tools every Computer has. A module that is refused is logged and
// reported at registration; the agent runs with the rest. Two tool dirs
// that offer the same tool, or a tool dir that takes an MCP server's
// namespace, are a configuration error; a deployed tool that clashes with
// the tool dirs is refused.
func (a *Agent) loadTools(ctx context.Context) ([]tool, error) {
	mcpNamespaces := a.cfg.MCP.namespaces()
	// A Computer refuses two tools with one key; find out now rather than
	// at the first command.
	check := newComputer("tools", a.log)
	var out []tool
	for _, spec := range a.cfg.ToolDirs {
		dir := parseToolDir(spec)
		if mcpNamespaces[dir.Namespace] {
			return nil, fmt.Errorf("agent: tools dir %s: namespace %q is also an MCP server's", dir.Path, dir.Namespace)
		}
		tools, err := a.loadDir(ctx, dir)
		if err != nil {
			return nil, err
		}
		if err := check.add(tools...); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		out = append(out, tools...)
	}
	deployed, err := a.deployedDirs()
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	for _, dir := range deployed {
		tools, err := a.loadDir(ctx, dir)
		if err != nil {
			return nil, err
		}
		for _, t := range tools {
			if err := check.add(t); err != nil {
				a.refuse(refusal{Path: filepath.Join(dir.Path, t.info().ToolName+".wasm"), Error: err.Error()})
				t.(*wasmTool).close(ctx)
				continue
			}
			out = append(out, t)
		}
	}
	return out, nil
}

// loadDir loads the modules of dir, refusing those that fail.
func (a *Agent) loadDir(ctx context.Context, dir toolDir) ([]tool, error) {
	tools, refused, err := a.loader.loadDir(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	for _, r := range refused {
		a.refuse(r)
	}
	a.log.Info("tools loaded", "namespace", dir.Namespace, "dir", dir.Path, "count", len(tools), "refused", len(refused))
	return tools, nil
}

// refuseUninstrumented waits for each wasm tool to be instrumented, in
// the order the sandbox instruments them, and refuses one that cannot be
// as a module that fails to load is refused: logged and reported at
// registration. It is taken out of every Computer, and the link registers
// again with the inventory without it.
func (a *Agent) refuseUninstrumented(ctx context.Context, tools []tool) {
	began, refused := time.Now(), 0
	defer func() {
		if ctx.Err() == nil {
			a.log.Info("tools instrumented", "count", len(tools)-refused, "refused", refused, "took", time.Since(began).Round(time.Millisecond))
		}
	}()
	for _, t := range tools {
		w, ok := t.(*wasmTool)
		if !ok {
			continue
		}
		err := w.mod.Ready(ctx)
		if ctx.Err() != nil {
			return
		}
		// A tool replaced by a deployed version meanwhile is out of the
		// inventory already.
		if !errors.Is(err, sandbox.ErrRefused) || !a.computers.removeBase(w) {
			continue
		}
		refused++
		a.refuse(refusal{Path: w.where, Error: fmt.Sprintf("%v (%s)", err, w.where)})
		w.close(ctx)
		a.inventoryChanged()
	}
}

// refuse logs a module that was not loaded and keeps it for registration.
func (a *Agent) refuse(r refusal) {
	a.log.Error("tool refused", "path", r.Path, "err", r.Error)
	a.refusedMu.Lock()
	defer a.refusedMu.Unlock()
	a.refused = append(a.refused, r)
}

// refusals are the modules refused since start.
func (a *Agent) refusals() []refusal {
	a.refusedMu.Lock()
	defer a.refusedMu.Unlock()
	return slices.Clone(a.refused)
}

// Close stops the MCP servers and frees the sandbox and the outbox. Call
// it after Run returns; calls after the first do nothing.
func (a *Agent) Close(ctx context.Context) error {
	a.closeOnce.Do(func() {
		if a.stopWatch != nil {
			a.stopWatch()
			a.watching.Wait()
		}
		if a.mcp != nil {
			a.mcp.close()
		}
		if a.outbox != nil {
			a.closeErr = a.outbox.close()
		}
		a.closeErr = errors.Join(a.closeErr, a.sb.Close(ctx))
	})
	return a.closeErr
}

// pruneCache removes from the agent's own compile cache the modules no
// loaded tool uses: those replaced by a deploy, or gone from the tool dirs.
func (a *Agent) pruneCache() {
	if a.cfg.CompileCacheDir != "" {
		return // shared
	}
	if err := a.sb.PruneCache(); err != nil {
		a.log.Warn("compile cache not pruned", "err", err)
	}
}

// inventoryChanged makes the link send the new inventory.
func (a *Agent) inventoryChanged() { notify(a.inventory) }

// notify signals ch without blocking; one pending signal is enough.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
