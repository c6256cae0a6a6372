package toolbox

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/edgeaip/edgeaip/agent/internal/computer"
)

// rolloutNamespace refuses a rollout whose name cannot be the namespace
// of its tools: not a safe file name, the meta tools', a tools dir's, an
// MCP server's, or one that tools deployed by hand went into.
func (b *Toolbox) rolloutNamespace(name string) error {
	if !validNamespace.MatchString(name) || name == computer.MetaNamespace {
		return fmt.Errorf("rollout %q: the name is its tools' namespace: want 1-64 of [A-Za-z0-9_-], not starting with '-', and not %q", name, computer.MetaNamespace)
	}
	if dir := b.toolDirOf(name); dir != "" {
		return fmt.Errorf("rollout %q: namespace %q is loaded from the tools dir %s", name, name, dir)
	}
	if b.cfg.MCP.Namespaces()[name] {
		return fmt.Errorf("rollout %q: namespace %q is an MCP server's", name, name)
	}
	if deployed, _ := filepath.Glob(filepath.Join(b.deployDir(), name, "*.wasm")); len(deployed) > 0 {
		return fmt.Errorf("rollout %q: namespace %q holds tools deployed by hand (%s)", name, name, filepath.Join(b.deployDir(), name))
	}
	return nil
}

// revisionWhere names a rollout's revision where an error names where a
// module came from.
func revisionWhere(rollout string, revision int) string {
	return fmt.Sprintf("rollout %q revision %d", rollout, revision)
}

// loadKept loads the kept module of digest sha as tool, a tool of
// namespace ns; where names the revision that wants it, for errors.
func (b *Toolbox) loadKept(ctx context.Context, ns, where, tool, sha string) (*wasmTool, error) {
	if !b.modules.has(sha) {
		return nil, fmt.Errorf("module %s for tool %q is not on this device; stage it first", sha, tool)
	}
	wasm, err := b.modules.read(sha)
	if err != nil {
		return nil, fmt.Errorf("tool %q (%s): %w", tool, where, err)
	}
	mod, err := b.pushedModule(wasm, where)
	if err != nil {
		return nil, err
	}
	if mod.Manifest.Name != tool {
		return nil, fmt.Errorf("module %s is tool %q, not %q (%s)", sha, mod.Manifest.Name, tool, where)
	}
	mod.Path = b.modules.path(sha)
	return b.loader.load(ctx, ns, where, mod)
}

// loadRollouts loads, at start, the tools of the current revision of
// each rollout on the device, with its overrides in place of its tools,
// after the tools of check. A rollout or a module that is refused is
// logged and reported at registration; the agent runs with the rest.
func (b *Toolbox) loadRollouts(ctx context.Context, check *computer.Computer) ([]computer.Tool, error) {
	states, err := b.readRollouts()
	if err != nil {
		return nil, err
	}
	var out []computer.Tool
	for _, s := range states {
		if err := b.rolloutNamespace(s.Rollout); err != nil {
			b.refuse(Refusal{Path: b.rolloutFile(s.Rollout), Error: "rollout not loaded: " + err.Error()})
			continue
		}
		b.remember(s)
		tools := s.loaded()
		for _, name := range slices.Sorted(maps.Keys(tools)) {
			t, err := b.loadKept(ctx, s.Rollout, revisionWhere(s.Rollout, s.Revision), name, tools[name])
			if err == nil {
				if err = check.Add(t); err != nil {
					t.close(ctx)
				}
			}
			if err != nil {
				b.refuse(Refusal{Path: b.modules.path(tools[name]), Error: err.Error()})
				continue
			}
			out = append(out, t)
		}
		b.log.Info("rollout loaded", "rollout", s.Rollout, "revision", s.Revision, "overrides", len(s.Overrides))
	}
	return out, nil
}
