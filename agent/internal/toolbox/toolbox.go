// Package toolbox holds the device's wasm tools: it loads them from the
// tool dirs, from the tools deployed to the device and from the rollouts
// applied to it, checks their signatures, applies the operator's
// capability policy, refuses the modules that fail (and reports them at
// registration), and installs new ones without a restart (the meta tools
// install_tool, stage_module and apply_revision). Calls go through
// sandbox/wasmtool, as aipctl tool run's do.
package toolbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
)

// Toolbox is the device's wasm tools. Load them once, at start.
type Toolbox struct {
	sb     *sandbox.Sandbox
	cfg    config.Config
	log    *slog.Logger
	loader *loader
	// changed is told when the inventory changed: a tool deployed, or
	// one refused once instrumented.
	changed func()

	refusedMu sync.Mutex
	refused   []Refusal // modules refused since start, reported at registration

	// deploying lets one change of the pushed tools happen at a time: an
	// install, a module staged, a revision applied.
	deploying sync.Mutex
	modules   moduleStore
	// rollouts are the states of the rollouts on the device, as their
	// files hold them; changed under deploying, after the file.
	rolloutsMu sync.Mutex
	rollouts   map[string]rolloutState
}

// New returns the toolbox of an agent configured by cfg, whose tools run
// in sb. changed is called whenever the tool inventory changes.
func New(sb *sandbox.Sandbox, cfg config.Config, log *slog.Logger, changed func()) *Toolbox {
	keys := signature.NewKeyRing(cfg.TrustedKeys...)
	require := keys.Len() > 0
	if cfg.RequireSigned != nil {
		require = *cfg.RequireSigned
	}
	return &Toolbox{sb: sb, cfg: cfg, log: log, changed: changed, modules: moduleStore{dir: filepath.Join(cfg.DataDir, "modules")},
		rollouts: map[string]rolloutState{}, loader: &loader{
			sb:        sb,
			verifier:  signature.Verifier{Keys: keys, RequireSigned: require},
			policies:  sandbox.Policies{Default: sandbox.Policy{Dirs: cfg.Mounts, Env: cfg.AllowEnv}, ByName: cfg.Policies},
			lookupEnv: os.LookupEnv,
		}}
}

// Load loads the tool dirs, then the tools deployed to this device, then
// the current revision of each rollout on it: the wasm tools every
// Computer has. A module that is refused is logged and reported at
// registration; the agent runs with the rest. Two tool dirs that offer
// the same tool, or a tool dir that takes an MCP server's namespace, are a
// configuration error; a deployed tool, or a rollout's, that clashes with
// the tools loaded before it is refused.
func (b *Toolbox) Load(ctx context.Context) ([]computer.Tool, error) {
	mcpNamespaces := b.cfg.MCP.Namespaces()
	// A Computer refuses two tools with one key; find out now rather than
	// at the first command.
	check := computer.New("tools", b.log)
	var out []computer.Tool
	for _, spec := range b.cfg.ToolDirs {
		dir := parseToolDir(spec)
		if mcpNamespaces[dir.Namespace] {
			return nil, fmt.Errorf("tools dir %s: namespace %q is also an MCP server's", dir.Path, dir.Namespace)
		}
		tools, err := b.loadDir(ctx, dir)
		if err != nil {
			return nil, err
		}
		if err := check.Add(tools...); err != nil {
			return nil, err
		}
		out = append(out, tools...)
	}
	deployed, err := b.deployedDirs()
	if err != nil {
		return nil, err
	}
	for _, dir := range deployed {
		tools, err := b.loadDir(ctx, dir)
		if err != nil {
			return nil, err
		}
		for _, t := range tools {
			if err := check.Add(t); err != nil {
				b.refuse(Refusal{Path: filepath.Join(dir.Path, t.Info().ToolName+".wasm"), Error: err.Error()})
				t.(*wasmTool).close(ctx)
				continue
			}
			out = append(out, t)
		}
	}
	rollouts, err := b.loadRollouts(ctx, check)
	if err != nil {
		return nil, err
	}
	return append(out, rollouts...), nil
}

// loadDir loads the modules of dir, refusing those that fail.
func (b *Toolbox) loadDir(ctx context.Context, dir toolDir) ([]computer.Tool, error) {
	tools, refused, err := b.loader.loadDir(ctx, dir)
	if err != nil {
		return nil, err
	}
	for _, r := range refused {
		b.refuse(r)
	}
	b.log.Info("tools loaded", "namespace", dir.Namespace, "dir", dir.Path, "count", len(tools), "refused", len(refused))
	return tools, nil
}

// RefuseUninstrumented waits for each wasm tool of tools to be
// instrumented, in the order the sandbox instruments them, and refuses one
// that cannot be as a module that fails to load is refused: logged and
// reported at registration. It is taken out of every Computer of m, and
// the inventory changes. It returns when every tool is instrumented or
// ctx ends.
func (b *Toolbox) RefuseUninstrumented(ctx context.Context, tools []computer.Tool, m *computer.Manager) {
	began, refused := time.Now(), 0
	defer func() {
		if ctx.Err() == nil {
			b.log.Info("tools instrumented", "count", len(tools)-refused, "refused", refused, "took", time.Since(began).Round(time.Millisecond))
		}
	}()
	for _, t := range tools {
		w, ok := t.(*wasmTool)
		if !ok {
			continue
		}
		err := w.Ready(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			b.logStart(w)
		}
		// A tool replaced by a deployed version meanwhile is out of the
		// inventory already.
		if !errors.Is(err, sandbox.ErrRefused) || !m.RemoveBase(w) {
			continue
		}
		refused++
		b.refuse(Refusal{Path: w.where, Error: fmt.Sprintf("%v (%s)", err, w.where)})
		w.close(ctx)
		b.changed()
	}
}

// PrepareSmall prepares the small wasm tools of tools, one after the
// other, until ctx ends: the agent does it before it first registers, so
// that a first call of a stock tool finds it ready, as the tool prepared
// first would, at the cost of registering a few hundred milliseconds
// later on a fresh data dir (less with its compile cache). What ctx
// leaves is prepared in the background, behind calls, as any tool is.
// A Go tool of megabytes, whose compile takes seconds, is left to the
// background.
func (b *Toolbox) PrepareSmall(ctx context.Context, tools []computer.Tool) {
	began, n := time.Now(), 0
	for _, t := range tools {
		w, ok := t.(*wasmTool)
		if !ok || !w.mod.Small() {
			continue
		}
		if w.Prepare(ctx) != nil && ctx.Err() != nil {
			break // a tool refused is the background's to report
		}
		n++
	}
	b.log.Info("small tools prepared before registering", "count", n, "took", time.Since(began).Round(time.Millisecond), "cut_short", ctx.Err() != nil)
}

// logStart says how a ready tool's calls start: a snapshot tool's
// initialization is paid once, here, and a tool that asked for a snapshot
// and could not have one says why.
func (b *Toolbox) logStart(w *wasmTool) {
	in := w.mod.Initialization()
	switch {
	case in.Fallback != nil:
		b.log.Warn("tool starts plainly", "tool", w.mod.Name(), "path", w.where, "reason", in.Fallback)
	case w.mod.Start() == sandbox.StartSnapshot:
		b.log.Info("tool initialized", "tool", w.mod.Name(), "fuel", in.Usage.Fuel, "took", in.Usage.Wall.Round(time.Microsecond), "memory_pages", in.Usage.MemoryPages)
	}
}

// refuse logs a module that was not loaded and keeps it for registration.
func (b *Toolbox) refuse(r Refusal) {
	b.log.Error("tool refused", "path", r.Path, "err", r.Error)
	b.refusedMu.Lock()
	defer b.refusedMu.Unlock()
	b.refused = append(b.refused, r)
}

// Refusals are the modules refused since start.
func (b *Toolbox) Refusals() []Refusal {
	b.refusedMu.Lock()
	defer b.refusedMu.Unlock()
	return slices.Clone(b.refused)
}

// PruneCache removes from the agent's own compile cache the modules no
// loaded tool uses: those replaced by a deploy, or gone from the tool
// dirs. A cache shared with other agents is left alone.
func (b *Toolbox) PruneCache() {
	if b.cfg.CompileCacheDir != "" {
		return // shared
	}
	if err := b.sb.PruneCache(); err != nil {
		b.log.Warn("compile cache not pruned", "err", err)
	}
}
