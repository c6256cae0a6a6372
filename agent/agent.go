package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
)

// Agent is a device agent. Build it with New, Run it once, then Close it.
type Agent struct {
	cfg       Config
	token     string
	log       *slog.Logger
	sb        *sandbox.Sandbox
	mcp       *mcpPool
	computers *ComputerManager
	router    *Router
	outbox    *outbox

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
	serverAcks atomic.Bool    // the server has acknowledged results
	wake       chan struct{}  // results wait to be delivered
	inventory  chan struct{}  // the tool list changed
}

// errRestarted is the failure of a command that was running when the agent
// died. It is reported, never run again.
var errRestarted = errors.New("agent restarted while the command ran")

// New loads the token, the tools and the outbox. It fails on a config that
// cannot work, such as a missing token file; a single bad tool module is
// logged and left out instead. Commands that were running when the agent
// last died are answered as failed, from the outbox, once it links up.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	cfg.setDefaults()
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	token, err := readToken(cfg.TokenFile)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("device", cfg.ID)
	sb, err := sandbox.New(ctx, sandbox.NewConfig().WithLimits(cfg.Limits).WithMounts(cfg.Mounts...).
		WithCacheDir(filepath.Join(cfg.DataDir, "compile-cache")))
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a := &Agent{
		cfg: cfg, token: token, sb: sb, log: log,
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
	a.mcp = newMCPPool(a.log, func() { notify(a.inventory) })
	a.computers = newComputerManager(a.cfg.MCP, tools, a.mcp, a.log)
	a.router = &Router{computers: a.computers, log: a.log}
	ob, interrupted, err := openOutbox(filepath.Join(a.cfg.DataDir, "outbox", a.cfg.ID+".journal"), a.cfg.Outbox, a.log)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	a.outbox = ob
	for _, c := range interrupted {
		a.log.Warn("command was running when the agent died; reporting it as failed", "response_id", c.ResponseID)
		reply := a.commandResults(c.SessionID, c.ResponseID, c.Status, failCalls(c.CallIDs, errRestarted))
		if err := a.outbox.complete(reply); err != nil {
			a.log.Error("failure not recorded; delivering it from memory", "response_id", c.ResponseID, "err", err)
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

// loadTools loads the wasm tool directories. Each is a namespace, which no
// MCP server may share.
func (a *Agent) loadTools(ctx context.Context) ([]tool, error) {
	mcpNamespaces := map[string]bool{}
	for _, roots := range a.cfg.MCP {
		for _, root := range roots {
			for _, s := range append(append([]MCPServerConfig{}, root.DataCollection...), root.Action...) {
				mcpNamespaces[s.Namespace] = true
			}
		}
	}
	var all []tool
	for _, spec := range a.cfg.ToolDirs {
		dir := parseToolDir(spec)
		if mcpNamespaces[dir.Namespace] {
			return nil, fmt.Errorf("agent: tools dir %s: namespace %q is also an MCP server's", dir.Path, dir.Namespace)
		}
		tools, err := loadToolDir(ctx, a.sb, dir, a.log)
		if err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		a.log.Info("tools loaded", "namespace", dir.Namespace, "dir", dir.Path, "count", len(tools))
		all = append(all, tools...)
	}
	// A Computer refuses two tools with one key; find out now rather than
	// at the first command.
	if err := newComputer("check", a.log).add(all...); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return all, nil
}

// Close stops the MCP servers and frees the sandbox and the outbox. Call
// it after Run returns.
func (a *Agent) Close(ctx context.Context) error {
	if a.mcp != nil {
		a.mcp.close()
	}
	var err error
	if a.outbox != nil {
		err = a.outbox.close()
	}
	return errors.Join(err, a.sb.Close(ctx))
}

// notify signals ch without blocking; one pending signal is enough.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
