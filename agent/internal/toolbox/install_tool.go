package toolbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"

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
// that is refused changes nothing.
type installTool struct {
	box       *Toolbox
	computers *computer.Manager
	mu        sync.Mutex // one install at a time
}

// Installer is the meta tool install_tool, which puts the tools it
// installs in the Computers of m.
func (b *Toolbox) Installer(m *computer.Manager) computer.Tool {
	return &installTool{box: b, computers: m}
}

// Info describes install_tool.
func (i *installTool) Info() protocol.MCPToolInfo {
	return protocol.MCPToolInfo{
		ToolKey:     protocol.ToolKey(protocol.ToolAction, protocol.InstallToolName),
		ToolName:    protocol.InstallToolName,
		Namespace:   computer.MetaNamespace,
		ToolType:    protocol.ToolAction,
		Title:       "Install tool",
		Description: "Installs a signed tool module on this device and loads it; the server's POST /api/devices/{id}/tools sends it.",
		InputSchema: protocol.InstallToolSchema,
	}
}

// Call installs the module params carry.
func (i *installTool) Call(ctx context.Context, params map[string]any) protocol.Result {
	info, replaced, err := i.install(ctx, params)
	if err != nil {
		i.box.log.Error("tool install refused", "err", err)
		return computer.Failure(fmt.Errorf("%s: %w", protocol.InstallToolName, err))
	}
	i.box.log.Info("tool installed", "tool_key", info.ToolKey, "namespace", info.Namespace, "sha256", info.Meta["sha256"], "replaced", replaced)
	return protocol.Result{Status: protocol.ResultSuccess, Result: map[string]any{"tool": info, "replaced": replaced}}
}

func (i *installTool) install(ctx context.Context, params map[string]any) (protocol.MCPToolInfo, bool, error) {
	b, m := i.box, i.computers
	var none protocol.MCPToolInfo
	wasm, ns, err := protocol.InstalledModule(params)
	if err != nil {
		return none, false, err
	}
	if ns == "" {
		ns = protocol.DefaultDeployNamespace
	}
	if err := b.deployable(ns); err != nil {
		return none, false, err
	}
	mod, err := manifest.FromWasm(wasm)
	if err != nil {
		return none, false, err
	}
	// Whatever require_signed says of the modules an operator puts on the
	// device, code pushed over the network must come from a trusted signer.
	if _, err := b.loader.verifier.Keys.Verify(wasm); err != nil {
		if b.loader.verifier.Keys.Len() == 0 {
			err = fmt.Errorf("this agent trusts no key (--trusted-key), and a deployed module must be signed by one")
		}
		return none, false, fmt.Errorf("tool %q (deployed module): refused: %w", mod.Manifest.Name, err)
	}

	i.mu.Lock()
	defer i.mu.Unlock()
	dest := filepath.Join(b.deployDir(), ns, mod.Manifest.Name+".wasm")
	mod.Path = dest // where it is kept once loaded
	t, err := b.loader.load(ctx, ns, "deployed module", mod)
	if err != nil {
		return none, false, err
	}
	// Once t has replaced the old version, or been refused, one of them
	// is closed: its module's cached copies go with it.
	defer b.PruneCache()
	// The operator learns now whether the module can run at all.
	if err := t.Prepare(ctx); err != nil {
		t.close(ctx)
		return none, false, fmt.Errorf("%w (deployed module)", err)
	}
	b.logStart(t)
	old := m.FindBase(ns, mod.Manifest.Name)
	if err := m.CanSwapBase(old, t); err != nil {
		t.close(ctx)
		return none, false, err
	}
	if err := atomicfile.Write(dest, wasm); err != nil {
		t.close(ctx)
		return none, false, fmt.Errorf("keep module: %w", err)
	}
	m.SwapBase(old, t)
	if w, ok := old.(*wasmTool); ok {
		w.replaceWith(context.WithoutCancel(ctx), t)
	}
	b.changed()
	return t.Info(), old != nil, nil
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
