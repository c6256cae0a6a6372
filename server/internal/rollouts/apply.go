package rollouts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/rollout"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
)

// InvalidError is a request that cannot be carried out as written: a bad
// module, an unknown digest, a selector that does not parse.
type InvalidError struct{ Reason string }

func (e *InvalidError) Error() string { return e.Reason }

// ConflictError is a change refused because of another rollout: two
// rollouts that would put the same tool on one device, a state that
// does not allow the change.
type ConflictError struct{ Reason string }

func (e *ConflictError) Error() string { return e.Reason }

// ErrNotFound: no rollout of that name.
var ErrNotFound = errors.New("no such rollout")

// maxFrameModule is the most a module may take on the wire once
// compressed and encoded: a device link's frame, less room for the rest
// of the command.
const maxFrameModule = protocol.DefaultMaxFrameBytes - 64<<10

// PutModule keeps wasm by its digest, for rollouts to name: it must
// carry a manifest, which names its tool, and fit a device's frame.
func (e *Engine) PutModule(ctx context.Context, who *identity.Caller, want string, wasm []byte) (api.ModuleResponse, error) {
	sum := sha256.Sum256(wasm)
	sha := hex.EncodeToString(sum[:])
	if want != sha {
		return api.ModuleResponse{}, &InvalidError{fmt.Sprintf("the module's SHA-256 is %s, not %s", sha, want)}
	}
	mod, err := manifest.FromWasm(wasm)
	if err != nil {
		return api.ModuleResponse{}, &InvalidError{fmt.Sprintf("module %.12s: %v", sha, err)}
	}
	params, err := protocol.StageModuleParams(wasm)
	if err != nil {
		return api.ModuleResponse{}, &InvalidError{err.Error()}
	}
	if n := len(params["module"].(string)); n > maxFrameModule {
		return api.ModuleResponse{}, &InvalidError{fmt.Sprintf("module is %d bytes once compressed and encoded; a device link carries frames of at most %d", n, protocol.DefaultMaxFrameBytes)}
	}
	m := store.Module{SHA256: sha, Tool: mod.Manifest.Name, Size: int64(len(wasm)), Body: wasm}
	err = e.cfg.Store.Write(ctx, func(tx *store.Tx) error {
		if err := tx.Rollouts().PutModule(m); err != nil {
			return err
		}
		return tx.Audit().Append(who.Audit(api.ActionModuleUpload, "", map[string]any{"sha256": sha, "tool": m.Tool, "bytes": m.Size}))
	})
	if err != nil {
		return api.ModuleResponse{}, err
	}
	return api.ModuleResponse{SHA256: sha, Tool: m.Tool, Bytes: m.Size}, nil
}

// Apply makes spec (its tools digests of kept modules) the newest
// revision of its rollout, for who, and starts bringing devices to it.
// A spec equal to the desired revision's makes no new revision.
func (e *Engine) Apply(ctx context.Context, who *identity.Caller, spec *rollout.Spec) (api.RolloutApplied, error) {
	out := api.RolloutApplied{Name: spec.Name}
	sel, err := access.ParseSelector(string(spec.Selector))
	if err != nil {
		return out, &InvalidError{"selector: " + err.Error()}
	}
	tools, err := e.toolsOf(ctx, spec.Tools)
	if err != nil {
		return out, err
	}
	selected, err := e.cfg.Matching(ctx, sel)
	if err != nil {
		return out, err
	}
	out.Selected = len(selected)
	if len(selected) == 0 {
		out.Note = fmt.Sprintf("the selector %s picks no device now; devices that gain its labels get the rollout", sel)
	}
	if err := e.conflicts(ctx, spec.Name, claims{tools, spec.Agent}, selected); err != nil {
		return out, err
	}
	specBytes := specJSON(spec)
	if rev, same := e.current(ctx, spec.Name, specBytes); same {
		out.Revision, out.Unchanged = rev, true
		return out, nil
	}
	err = e.cfg.Store.Write(ctx, func(tx *store.Tx) error {
		rev, err := tx.Rollouts().AddRevision(store.RolloutRevision{Name: spec.Name, Spec: specBytes, Tools: tools, CreatedBy: who.Name}, api.RolloutRolling)
		out.Revision = rev
		if err != nil {
			return err
		}
		return tx.Audit().Append(who.Audit(api.ActionRolloutApply, "", map[string]any{
			"rollout": spec.Name, "revision": rev, "selector": sel.String(), "tools": tools}))
	})
	if err != nil {
		return out, err
	}
	e.log.Info("rollout applied", "rollout", spec.Name, "revision", out.Revision, "selected", out.Selected, "by", who.Name)
	e.Kick(spec.Name)
	e.announce(spec.Name)
	return out, nil
}

// toolsOf are the kept modules digests name, by tool name.
func (e *Engine) toolsOf(ctx context.Context, digests []string) (map[string]string, error) {
	tools := map[string]string{}
	for i, sha := range digests {
		tool, err := e.cfg.Store.Rollouts().ModuleTool(ctx, sha)
		if errors.Is(err, store.ErrNotFound) {
			return nil, &InvalidError{fmt.Sprintf("tools[%d]: the server keeps no module %s: upload it first (PUT /api/modules/%s)", i, sha, sha)}
		}
		if err != nil {
			return nil, err
		}
		if other, dup := tools[tool]; dup {
			return nil, &InvalidError{fmt.Sprintf("tools[%d]: modules %.12s and %.12s are both tool %q", i, other, sha, tool)}
		}
		tools[tool] = sha
	}
	return tools, nil
}

// current is the desired revision of rollout name, and whether spec is
// its spec.
func (e *Engine) current(ctx context.Context, name string, spec []byte) (int, bool) {
	r, err := e.cfg.Store.Rollouts().Get(ctx, name)
	if err != nil || r.Revision == 0 {
		return 0, false
	}
	rev, err := e.cfg.Store.Rollouts().Revision(ctx, name, r.Revision)
	return r.Revision, err == nil && bytes.Equal(rev.Spec, spec)
}

// conflicts refuses a rollout that sets what another sets on one of
// devices: a tool of the same name, or the agent's version (two rollouts
// of the agent would take turns at each device's agent).
func (e *Engine) conflicts(ctx context.Context, name string, sets claims, devices []string) error {
	others, err := e.desired(ctx)
	if err != nil {
		return err
	}
	for _, o := range others {
		if o.name == name {
			continue
		}
		shared := sets.shared(o.claims)
		if len(shared) == 0 {
			continue
		}
		theirs, err := e.cfg.Matching(ctx, o.selector)
		if err != nil {
			return err
		}
		if both := intersect(devices, theirs); len(both) > 0 {
			return &ConflictError{fmt.Sprintf("rollouts %q and %q would both set %s on %s: give the tools other names, leave the agent to one of them, or set the selectors' devices apart",
				name, o.name, strings.Join(shared, ", "), someDevices(both))}
		}
	}
	return nil
}

// CheckLabels refuses labels for device id if two rollouts whose
// selectors pick them would set the same thing on it: a tool of the same
// name, or the agent's version.
func (e *Engine) CheckLabels(ctx context.Context, id string, labels map[string]string) error {
	all, err := e.desired(ctx)
	if err != nil {
		return err
	}
	var picking []desiredRollout
	for _, o := range all {
		if o.selector.Matches(labels) {
			picking = append(picking, o)
		}
	}
	for i, a := range picking {
		for _, b := range picking[i+1:] {
			if shared := a.shared(b.claims); len(shared) > 0 {
				return &ConflictError{fmt.Sprintf("with these labels, rollouts %q and %q would both set %s on device %s", a.name, b.name, strings.Join(shared, ", "), id)}
			}
		}
	}
	return nil
}

// OwnerOf is the rollout that puts tool on device id, if one does, and
// its desired revision.
func (e *Engine) OwnerOf(ctx context.Context, id, tool string) (name string, revision int, err error) {
	rows, err := e.cfg.Store.Rollouts().OfDevice(ctx, id)
	if err != nil {
		return "", 0, err
	}
	all, err := e.desired(ctx)
	if err != nil {
		return "", 0, err
	}
	for _, row := range rows {
		for _, o := range all {
			if o.name == row.Name && o.tools[tool] != "" {
				return o.name, o.revision, nil
			}
		}
	}
	return "", 0, nil
}

// desiredRollout is a rollout's desired revision: its selector and tools.
type desiredRollout struct {
	name     string
	revision int
	selector access.Selector
	claims
}

// claims are what a rollout sets on its devices: its tools, by name, and
// the agent's version, if it names one.
type claims struct {
	tools map[string]string
	agent string
}

// shared describes what c and o both set.
func (c claims) shared(o claims) []string {
	var out []string
	if c.agent != "" && o.agent != "" {
		out = append(out, "the agent's version")
	}
	for _, t := range slices.Sorted(maps.Keys(c.tools)) {
		if _, ok := o.tools[t]; ok {
			out = append(out, "tool "+t)
		}
	}
	return out
}

// desired are the rollouts that want tools on devices now.
func (e *Engine) desired(ctx context.Context) ([]desiredRollout, error) {
	all, err := e.cfg.Store.Rollouts().List(ctx)
	if err != nil {
		return nil, err
	}
	var out []desiredRollout
	for _, r := range all {
		if r.Revision == 0 {
			continue
		}
		tools, spec, sel, err := e.desiredOf(ctx, r)
		if err != nil {
			return nil, err
		}
		out = append(out, desiredRollout{name: r.Name, revision: r.Revision, selector: sel, claims: claims{tools, spec.Agent}})
	}
	return out, nil
}

func intersect(a, b []string) []string {
	in := map[string]bool{}
	for _, id := range b {
		in[id] = true
	}
	var out []string
	for _, id := range a {
		if in[id] {
			out = append(out, id)
		}
	}
	return out
}

// someDevices names devices, the first three and how many more.
func someDevices(ids []string) string {
	if len(ids) <= 3 {
		return "device " + strings.Join(ids, ", ")
	}
	return fmt.Sprintf("devices %s and %d more", strings.Join(ids[:3], ", "), len(ids)-3)
}
