package toolbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/sandbox/wasmtool"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
)

// wasmTool is a tool module loaded into the sandbox.
type wasmTool struct {
	tool      *wasmtool.Tool
	mod       *sandbox.Tool // tool.Module()
	namespace string
	where     string // where the module came from: its file, or "deployed module"
	verdict   signature.Verdict
	// next is the version deployed in this one's place, if any. A command
	// resolves its actions before the first runs; an action whose tool
	// was replaced since runs on the replacement.
	next atomic.Pointer[wasmTool]
}

// Info describes the tool as the device lists it.
func (t *wasmTool) Info() protocol.MCPToolInfo {
	m := t.tool.Manifest()
	tt := protocol.ToolType(m.ToolType)
	return protocol.MCPToolInfo{
		ToolKey:      protocol.ToolKey(tt, m.Name),
		ToolName:     m.Name,
		Namespace:    t.namespace,
		ToolType:     tt,
		Description:  m.Description,
		InputSchema:  m.InputSchema,
		OutputSchema: m.OutputSchema,
		Meta:         t.meta(),
	}
}

// meta is what an operator needs to know about a loaded module: which one
// it is, who signed it, what it asked for and what it was granted, and how
// its calls start (sandbox.Start: from a snapshot, plainly, or as a
// command).
func (t *wasmTool) meta() map[string]any {
	requested := map[string]any{}
	if dirs := t.tool.Manifest().Capabilities.Dirs; len(dirs) > 0 {
		list := make([]any, len(dirs))
		for i, d := range dirs {
			list[i] = map[string]any{"path": d.Path, "mode": string(d.Mode)}
		}
		requested["dirs"] = list
	}
	if env := t.tool.Manifest().Capabilities.Env; len(env) > 0 {
		requested["env"] = anyList(env)
	}
	granted := map[string]any{}
	if mounts := t.mod.Mounts(); len(mounts) > 0 {
		list := make([]any, len(mounts))
		for i, m := range mounts {
			list[i] = map[string]any{"path": m.GuestPath, "mode": modeOf(m)}
		}
		granted["dirs"] = list
	}
	if env := t.mod.EnvKeys(); len(env) > 0 {
		granted["env"] = anyList(env)
	}
	l := t.mod.Limits()
	meta := map[string]any{
		"sha256":       t.mod.SHA256(),
		"manifest":     string(t.tool.Source()),
		"capabilities": requested,
		"granted":      granted,
		"limits":       map[string]any{"timeout": l.Timeout.String(), "memory_pages": l.MemoryPages, "fuel": l.Fuel},
		"signature":    signatureState(t.verdict),
		"start":        string(t.mod.Start()),
	}
	if v := t.tool.Manifest().Version; v != "" {
		meta["version"] = v
	}
	if t.verdict.KeyID != "" {
		meta["signer"] = t.verdict.KeyID
	}
	return meta
}

func signatureState(v signature.Verdict) string {
	switch {
	case v.Verified:
		return "verified"
	case v.KeyID != "":
		return "unverified"
	}
	return "none"
}

func modeOf(m sandbox.Mount) string {
	if m.ReadOnly {
		return string(manifest.ReadOnly)
	}
	return string(manifest.ReadWrite)
}

func anyList(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// Call runs the tool once, or its replacement if it was replaced.
func (t *wasmTool) Call(ctx context.Context, params map[string]any) protocol.Result {
	out, err := t.tool.Run(ctx, params)
	if err != nil {
		return computer.Failure(err)
	}
	if next := t.next.Load(); next != nil && errors.Is(out.Err, sandbox.ErrUnloaded) {
		return next.Call(ctx, params)
	}
	return wasmtool.Result(out)
}

// Ready waits until the module is instrumented for fuel, or refused.
func (t *wasmTool) Ready(ctx context.Context) error { return t.mod.Ready(ctx) }

// Prepare is Ready for a command that waits for the tool: its module is
// prepared at once, ahead of the tools nobody waits for
// (sandbox.Tool.Prepare).
func (t *wasmTool) Prepare(ctx context.Context) error { return t.mod.Prepare(ctx) }

// close frees the module once its running calls end.
func (t *wasmTool) close(ctx context.Context) { t.mod.Close(ctx) }

// replaceWith closes t, sending the calls that reach it afterwards to
// next. Calls already running on t finish on it.
func (t *wasmTool) replaceWith(ctx context.Context, next *wasmTool) {
	t.next.Store(next)
	t.close(ctx)
}

// loader turns tool modules into tools: it reads the manifest, checks
// the signature, applies the capability policy and loads the module into
// the sandbox, which instruments it in the background (sandbox.Tool.Ready).
type loader struct {
	sb        *sandbox.Sandbox
	verifier  signature.Verifier
	policies  sandbox.Policies
	lookupEnv func(string) (string, bool)
}

// load loads mod as a tool of namespace; where names where mod came from,
// for errors.
func (l *loader) load(ctx context.Context, namespace, where string, mod manifest.Module) (*wasmTool, error) {
	name := mod.Manifest.Name
	verdict, err := l.verifier.Check(mod.Wasm)
	if err != nil {
		return nil, fmt.Errorf("tool %q (%s): refused: %w", name, where, err)
	}
	if l.verifier.RequireSigned && mod.Source != manifest.Embedded {
		return nil, fmt.Errorf("tool %q (%s): refused: its manifest is a sidecar NAME.json, which no signature covers; embed it with aipctl tool pack, then sign", name, where)
	}
	t, err := wasmtool.Load(ctx, l.sb, mod, l.policies.For(namespace, name), l.lookupEnv)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, where)
	}
	return &wasmTool{tool: t, mod: t.Module(), namespace: namespace, where: where, verdict: verdict}, nil
}

// toolDir is a directory of tool modules that forms one namespace.
type toolDir struct {
	Namespace string
	Path      string
}

// parseToolDir parses "DIR" or "NAMESPACE=DIR"; the namespace defaults to
// the directory's base name.
func parseToolDir(spec string) toolDir {
	if ns, dir, ok := strings.Cut(spec, "="); ok && ns != "" {
		return toolDir{Namespace: ns, Path: dir}
	}
	return toolDir{Namespace: filepath.Base(filepath.Clean(spec)), Path: spec}
}

// Refusal is a module that was not loaded, and why.
type Refusal struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// loadDir loads every NAME.wasm of dir. A module that fails to load is
// refused and left out; the rest still load.
func (l *loader) loadDir(ctx context.Context, dir toolDir) ([]computer.Tool, []Refusal, error) {
	if _, err := os.Stat(dir.Path); err != nil {
		return nil, nil, fmt.Errorf("tools dir: %w", err)
	}
	paths, err := filepath.Glob(filepath.Join(dir.Path, "*.wasm"))
	if err != nil {
		return nil, nil, fmt.Errorf("tools dir %s: %w", dir.Path, err)
	}
	sort.Strings(paths)
	var tools []computer.Tool
	var refused []Refusal
	for _, p := range paths {
		t, err := l.loadFile(ctx, dir.Namespace, p)
		if err != nil {
			refused = append(refused, Refusal{Path: p, Error: err.Error()})
			continue
		}
		tools = append(tools, t)
	}
	return tools, refused, nil
}

func (l *loader) loadFile(ctx context.Context, namespace, path string) (*wasmTool, error) {
	mod, err := manifest.Load(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l.load(ctx, namespace, path, mod)
}
