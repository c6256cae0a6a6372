package toolbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"

	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/internal/atomicfile"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
)

// validNamespace is what a deployed namespace may be called: it names a
// directory under DATA/tools.
var validNamespace = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$`)

// installTool is the meta tool install_tool. The server pushes a module;
// the agent checks it as it checks the modules it loads from disk, keeps
// it as DATA/tools/NAMESPACE/NAME.wasm and loads it without restarting,
// in place of the namespace's tool of that name if there is one. A module
// that is refused changes nothing. A tool that a rollout put on the
// device is replaced only with force, as an override of the rollout's.
type installTool struct {
	box       *Toolbox
	computers *computer.Manager
}

// MetaTools are the meta tools that change the device's tools, which put
// the tools they load in the Computers of m: install_tool, stage_module
// and apply_revision.
func (b *Toolbox) MetaTools(m *computer.Manager) []computer.Tool {
	return []computer.Tool{&installTool{box: b, computers: m}, &stageModule{box: b}, &applyRevision{box: b, computers: m}}
}

// Info describes install_tool.
func (i *installTool) Info() protocol.MCPToolInfo {
	return computer.MetaToolInfo(protocol.InstallToolName, "Install tool",
		"Installs a signed tool module on this device and loads it; the server's POST /api/devices/{id}/tools sends it.",
		protocol.InstallToolSchema)
}

// installed is a tool install_tool loaded: in place of another
// (replaced), and in rollout's namespace if it overrides the rollout's
// tool.
type installed struct {
	info     protocol.MCPToolInfo
	replaced bool
	rollout  string
}

// Call installs the module params carry.
func (i *installTool) Call(ctx context.Context, params map[string]any) protocol.Result {
	in, err := i.install(ctx, params)
	if err != nil {
		i.box.log.Error("tool install refused", "err", err)
		return computer.Failure(fmt.Errorf("%s: %w", protocol.InstallToolName, err))
	}
	i.box.log.Info("tool installed", "tool_key", in.info.ToolKey, "namespace", in.info.Namespace, "sha256", in.info.Meta["sha256"], "replaced", in.replaced, "overrides_rollout", in.rollout)
	out := map[string]any{"tool": in.info, "replaced": in.replaced}
	if in.rollout != "" {
		out["rollout"] = in.rollout
	}
	return protocol.Result{Status: protocol.ResultSuccess, Result: out}
}

func (i *installTool) install(ctx context.Context, params map[string]any) (installed, error) {
	b := i.box
	wasm, ns, err := protocol.InstalledModule(params)
	if err != nil {
		return installed{}, err
	}
	force, ok := params["force"].(bool)
	if _, present := params["force"]; present && !ok {
		return installed{}, errors.New(`parameter "force": not a boolean`)
	}
	mod, err := b.pushedModule(wasm, "deployed module")
	if err != nil {
		return installed{}, err
	}
	b.deploying.Lock()
	defer b.deploying.Unlock()
	if owner, owned := b.rolloutOwning(mod.Manifest.Name); owned {
		if !force {
			return installed{}, fmt.Errorf("tool %q belongs to rollout %q (revision %d); deploy with force to override it", mod.Manifest.Name, owner.Rollout, owner.Revision)
		}
		return b.override(ctx, i.computers, owner, mod)
	}
	if ns == "" {
		ns = protocol.DefaultDeployNamespace
	}
	if err := b.deployable(ns); err != nil {
		return installed{}, err
	}
	dest := filepath.Join(b.deployDir(), ns, mod.Manifest.Name+".wasm")
	mod.Path = dest // where it is kept once loaded
	return b.replaceTool(ctx, i.computers, ns, "deployed module", mod, func() error {
		if err := atomicfile.Write(dest, wasm); err != nil {
			return fmt.Errorf("keep module: %w", err)
		}
		return nil
	})
}

// override loads mod in place of rollout owner's tool of its name, in
// the rollout's namespace, keeps it among the kept modules and records it
// in the rollout's state, which shows it as drift until the rollout's next
// revision. Callers hold b.deploying.
func (b *Toolbox) override(ctx context.Context, m *computer.Manager, owner rolloutState, mod manifest.Module) (installed, error) {
	sha := sha256Hex(mod.Wasm)
	mod.Path = b.modules.path(sha)
	in, err := b.replaceTool(ctx, m, owner.Rollout, "deployed module", mod, func() error {
		if _, err := b.modules.keep(sha, mod.Wasm); err != nil {
			return err
		}
		next := owner
		next.Overrides = maps.Clone(owner.Overrides)
		if next.Overrides == nil {
			next.Overrides = map[string]string{}
		}
		next.Overrides[mod.Manifest.Name] = sha
		return b.saveRollout(next)
	})
	in.rollout = owner.Rollout
	return in, err
}

// replaceTool loads mod as a tool of namespace ns in place of the
// namespace's tool of its name, if there is one. It prepares it, so that
// the operator learns now whether it can run, and checks that its key is
// free; then keep keeps it, and only then is it swapped in. A failure at
// any step changes nothing. where names where mod came from, for errors.
func (b *Toolbox) replaceTool(ctx context.Context, m *computer.Manager, ns, where string, mod manifest.Module, keep func() error) (installed, error) {
	t, err := b.loader.load(ctx, ns, where, mod)
	if err != nil {
		return installed{}, err
	}
	// Once t has replaced the old version, or been refused, one of them
	// is closed: its module's cached copies go with it.
	defer b.PruneCache()
	old := m.FindBase(ns, mod.Manifest.Name)
	if err := b.admit(ctx, m, t, old, where); err != nil {
		return installed{}, err
	}
	if err := keep(); err != nil {
		t.close(ctx)
		return installed{}, err
	}
	b.swapIn(ctx, m, old, t)
	b.changed()
	return installed{info: t.Info(), replaced: old != nil}, nil
}

// admit prepares t, which is to take old's place (nil: none's), and
// checks that its key is free; it closes t if either fails.
func (b *Toolbox) admit(ctx context.Context, m *computer.Manager, t *wasmTool, old computer.Tool, where string) error {
	// The operator learns now whether the module can run at all.
	if err := t.Prepare(ctx); err != nil {
		t.close(ctx)
		return fmt.Errorf("%w (%s)", err, where)
	}
	b.logStart(t)
	if err := m.CanSwapBase(old, t); err != nil {
		t.close(ctx)
		return err
	}
	return nil
}

// swapIn puts t in old's place (nil: none's) in every Computer of m; the
// calls that reach old afterwards run on t.
func (b *Toolbox) swapIn(ctx context.Context, m *computer.Manager, old computer.Tool, t *wasmTool) {
	m.SwapBase(old, t)
	if w, ok := old.(*wasmTool); ok {
		w.replaceWith(context.WithoutCancel(ctx), t)
	}
}

// pushedModule reads the manifest of a module the server pushed, which
// must be signed by a trusted key whatever require_signed says of the
// modules an operator puts on the device. where names where it came from,
// for errors.
func (b *Toolbox) pushedModule(wasm []byte, where string) (manifest.Module, error) {
	mod, err := manifest.FromWasm(wasm)
	if err != nil {
		return mod, err
	}
	if _, err := b.loader.verifier.Keys.Verify(wasm); err != nil {
		if b.loader.verifier.Keys.Len() == 0 {
			err = fmt.Errorf("this agent trusts no key (--trusted-key), and a deployed module must be signed by one")
		}
		return mod, fmt.Errorf("tool %q (%s): refused: %w", mod.Manifest.Name, where, err)
	}
	return mod, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// deployable refuses a namespace that deployed tools may not go into: one
// that is not a safe directory name, the meta tools', or one a tools dir
// serves.
func (b *Toolbox) deployable(ns string) error {
	if !validNamespace.MatchString(ns) || ns == computer.MetaNamespace {
		return fmt.Errorf("namespace %q: want 1-64 of [A-Za-z0-9_-], not starting with '-', and not %q", ns, computer.MetaNamespace)
	}
	if dir := b.toolDirOf(ns); dir != "" {
		return fmt.Errorf("namespace %q is loaded from the tools dir %s; deploy into another namespace", ns, dir)
	}
	if _, ok := b.rollout(ns); ok {
		return fmt.Errorf("namespace %q holds the tools of rollout %q; deploy into another namespace", ns, ns)
	}
	return nil
}

// deployDir holds the deployed tools, one directory per namespace.
func (b *Toolbox) deployDir() string { return filepath.Join(b.cfg.DataDir, "tools") }

// deployedDirs lists the namespaces of deployed tools, to load at start.
func (b *Toolbox) deployedDirs() ([]toolDir, error) {
	entries, err := os.ReadDir(b.deployDir())
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("deployed tools: %w", err)
	}
	var dirs []toolDir
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		path := filepath.Join(b.deployDir(), e.Name())
		if err := b.deployable(e.Name()); err != nil {
			b.refuse(Refusal{Path: path, Error: "deployed tools not loaded: " + err.Error()})
			continue
		}
		dirs = append(dirs, toolDir{Namespace: e.Name(), Path: path})
	}
	return dirs, nil
}

// toolDirOf returns the tools dir that serves namespace ns, if any.
func (b *Toolbox) toolDirOf(ns string) string {
	for _, spec := range b.cfg.ToolDirs {
		if d := parseToolDir(spec); d.Namespace == ns {
			return d.Path
		}
	}
	return ""
}
