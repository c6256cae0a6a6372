package toolbox

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/protocol"
)

// applyRevision is the meta tool apply_revision: it makes a revision of a
// rollout the device's, from modules staged before, all at once or not at
// all. The revision it replaces stays recorded, and its modules kept, so
// that a rollback is one more apply_revision, with no download.
type applyRevision struct {
	box       *Toolbox
	computers *computer.Manager
}

// Info describes apply_revision.
func (a *applyRevision) Info() protocol.MCPToolInfo {
	return computer.MetaToolInfo(protocol.ApplyRevisionName, "Apply revision",
		"Makes a revision of a rollout this device's: loads its staged modules in the rollout's namespace, in place of the rollout's tools, all or none.",
		protocol.ApplyRevisionSchema)
}

// applied is what apply_revision did: the tools of the rollout now, and
// those it took off the device.
type applied struct {
	rev       protocol.Revision
	tools     []protocol.MCPToolInfo
	removed   []string
	unchanged bool
}

// Call applies the revision params name.
func (a *applyRevision) Call(ctx context.Context, params map[string]any) protocol.Result {
	rev, err := protocol.ParseApplyRevision(params)
	if err != nil {
		return computer.Failure(fmt.Errorf("%s: %w", protocol.ApplyRevisionName, err))
	}
	out, err := a.box.apply(ctx, a.computers, rev)
	if err != nil {
		a.box.log.Error("revision refused", "rollout", rev.Rollout, "revision", rev.Number, "err", err)
		return computer.Failure(fmt.Errorf("%s: rollout %q revision %d: %w", protocol.ApplyRevisionName, rev.Rollout, rev.Number, err))
	}
	a.box.log.Info("revision applied", "rollout", rev.Rollout, "revision", rev.Number, "tools", len(out.tools), "removed", out.removed, "unchanged", out.unchanged)
	return protocol.Result{Status: protocol.ResultSuccess, Result: map[string]any{
		"rollout": rev.Rollout, "revision": int64(rev.Number), "tools": out.tools, "removed": anyList(out.removed), "unchanged": out.unchanged,
	}}
}

// apply makes rev its rollout's current revision on the device.
func (b *Toolbox) apply(ctx context.Context, m *computer.Manager, rev protocol.Revision) (applied, error) {
	if err := b.rolloutNamespace(rev.Rollout); err != nil {
		return applied{}, err
	}
	b.deploying.Lock()
	defer b.deploying.Unlock()
	cur, had := b.rollout(rev.Rollout)
	if tools, ok := b.current(m, cur, had, rev); ok {
		return applied{rev: rev, tools: tools, removed: []string{}, unchanged: true}, nil
	}
	if len(rev.Tools) == 0 {
		return b.remove(ctx, m, cur, rev)
	}
	loaded, err := b.loadRevision(ctx, m, rev)
	if err != nil {
		return applied{}, err
	}
	next := rolloutState{Rollout: rev.Rollout, Revision: rev.Number, Tools: maps.Clone(rev.Tools), Overrides: map[string]string{}}
	if had {
		next.Previous = &revisionTools{Revision: cur.Revision, Tools: cur.Tools}
	}
	if err := b.saveRollout(next); err != nil {
		b.closeFresh(ctx, loaded)
		return applied{}, err
	}
	out := applied{rev: rev, removed: b.swapRevision(ctx, m, cur, loaded)}
	for _, name := range slices.Sorted(maps.Keys(loaded)) {
		out.tools = append(out.tools, loaded[name].tool.Info())
	}
	b.afterChange()
	return out, nil
}

// current reports whether rev is the rollout's revision already, with
// every one of its tools loaded, and then returns them: applied again, it
// changes nothing. No tools are current for a rollout the device does
// not have.
func (b *Toolbox) current(m *computer.Manager, cur rolloutState, had bool, rev protocol.Revision) ([]protocol.MCPToolInfo, bool) {
	if !had {
		return []protocol.MCPToolInfo{}, len(rev.Tools) == 0
	}
	if cur.Revision != rev.Number || !maps.Equal(cur.Tools, rev.Tools) {
		return nil, false
	}
	tools := []protocol.MCPToolInfo{}
	want := cur.loaded()
	for _, name := range slices.Sorted(maps.Keys(want)) {
		t, ok := m.FindBase(rev.Rollout, name).(*wasmTool)
		if !ok || t.mod.SHA256() != want[name] {
			return nil, false
		}
		tools = append(tools, t.Info())
	}
	return tools, true
}

// revisionTool is a tool of a revision being applied, and the tool of its
// name it takes the place of, if any. A tool whose module is loaded
// already stays (fresh false).
type revisionTool struct {
	tool  *wasmTool
	old   computer.Tool
	fresh bool
}

// loadRevision loads and prepares each tool of rev that is not loaded
// already, and checks that its key is free. On any failure, it closes
// what it loaded and says why.
func (b *Toolbox) loadRevision(ctx context.Context, m *computer.Manager, rev protocol.Revision) (map[string]revisionTool, error) {
	names := slices.Sorted(maps.Keys(rev.Tools))
	for _, name := range names {
		if sha := rev.Tools[name]; !b.modules.has(sha) {
			return nil, fmt.Errorf("module %s for tool %q is not on this device; stage it first", sha, name)
		}
	}
	where := revisionWhere(rev.Rollout, rev.Number)
	loaded := make(map[string]revisionTool, len(names))
	for _, name := range names {
		old := m.FindBase(rev.Rollout, name)
		if w, ok := old.(*wasmTool); ok && w.mod.SHA256() == rev.Tools[name] {
			loaded[name] = revisionTool{tool: w, old: old}
			continue
		}
		t, err := b.loadKept(ctx, rev.Rollout, where, name, rev.Tools[name])
		if err == nil {
			err = b.admit(ctx, m, t, old, where)
		}
		if err != nil {
			b.closeFresh(ctx, loaded)
			return nil, err
		}
		loaded[name] = revisionTool{tool: t, old: old, fresh: true}
	}
	return loaded, nil
}

// closeFresh closes the tools a revision that failed loaded; their
// modules' cached copies go with them.
func (b *Toolbox) closeFresh(ctx context.Context, loaded map[string]revisionTool) {
	for _, rt := range loaded {
		if rt.fresh {
			rt.tool.close(ctx)
		}
	}
	b.PruneCache()
}

// swapRevision puts the tools loaded for a revision in place of those of
// cur, the rollout's state before, and takes out those of cur the revision
// does not have, whose names it returns, sorted.
func (b *Toolbox) swapRevision(ctx context.Context, m *computer.Manager, cur rolloutState, loaded map[string]revisionTool) []string {
	for _, rt := range loaded {
		if rt.fresh {
			b.swapIn(ctx, m, rt.old, rt.tool)
		}
	}
	removed := []string{}
	for _, name := range slices.Sorted(maps.Keys(cur.loaded())) {
		if _, stays := loaded[name]; !stays {
			b.unload(ctx, m, cur.Rollout, name)
			removed = append(removed, name)
		}
	}
	return removed
}

// remove takes rollout cur's tools off the device and forgets it: what
// an empty revision asks for.
func (b *Toolbox) remove(ctx context.Context, m *computer.Manager, cur rolloutState, rev protocol.Revision) (applied, error) {
	if err := b.dropRollout(cur.Rollout); err != nil {
		return applied{}, err
	}
	removed := slices.Sorted(maps.Keys(cur.loaded()))
	for _, name := range removed {
		b.unload(ctx, m, cur.Rollout, name)
	}
	b.afterChange()
	return applied{rev: rev, tools: []protocol.MCPToolInfo{}, removed: removed}, nil
}

// unload takes the tool name of namespace ns out of every Computer of m
// and closes it, if it is loaded.
func (b *Toolbox) unload(ctx context.Context, m *computer.Manager, ns, name string) {
	if t, ok := m.FindBase(ns, name).(*wasmTool); ok && m.RemoveBase(t) {
		t.close(context.WithoutCancel(ctx))
	}
}

// afterChange follows a change of a rollout's tools: the inventory is
// sent again, and the compile cache and the kept modules lose what
// nothing uses any more.
func (b *Toolbox) afterChange() {
	b.changed()
	b.PruneCache()
	b.collectModules()
}
