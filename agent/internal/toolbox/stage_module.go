package toolbox

import (
	"context"
	"fmt"

	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/protocol"
)

// stageModule is the meta tool stage_module: it keeps a module that a
// rollout's revision will name, checked as install_tool checks one, and
// loads nothing, so that apply_revision then changes a rollout's tools
// together, with every module at hand.
type stageModule struct{ box *Toolbox }

// Info describes stage_module.
func (s *stageModule) Info() protocol.MCPToolInfo {
	return computer.MetaToolInfo(protocol.StageModuleName, "Stage module",
		"Keeps a signed tool module on this device, by its SHA-256, for a rollout's apply_revision to load; it loads nothing.",
		protocol.StageModuleSchema)
}

// Call keeps the module params carry.
func (s *stageModule) Call(_ context.Context, params map[string]any) protocol.Result {
	out, err := s.box.stage(params)
	if err != nil {
		s.box.log.Error("module staging refused", "err", err)
		return computer.Failure(fmt.Errorf("%s: %w", protocol.StageModuleName, err))
	}
	s.box.log.Info("module staged", "sha256", out["sha256"], "tool", out["tool"], "already", out["already"])
	return protocol.Result{Status: protocol.ResultSuccess, Result: out}
}

// stage checks the module params carry and keeps it; one kept already
// counts as staged now.
func (b *Toolbox) stage(params map[string]any) (map[string]any, error) {
	wasm, _, err := protocol.InstalledModule(params)
	if err != nil {
		return nil, err
	}
	mod, err := b.pushedModule(wasm, "staged module")
	if err != nil {
		return nil, err
	}
	sha := sha256Hex(wasm)
	// Not while a revision applied collects the modules it no longer
	// needs: this one is needed.
	b.deploying.Lock()
	defer b.deploying.Unlock()
	already, err := b.modules.keep(sha, wasm)
	if err != nil {
		return nil, err
	}
	return map[string]any{"sha256": sha, "tool": mod.Manifest.Name, "bytes": int64(len(wasm)), "already": already}, nil
}
