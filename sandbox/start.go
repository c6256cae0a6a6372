package sandbox

import (
	"context"
	"fmt"

	"github.com/edgeaip/edgeaip/wasmtools/abi"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/edgeaip/edgeaip/wasmtools/meter"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// Start is how a tool's calls start. Every call gets a fresh instance;
// they differ in what that instance runs before the tool's own work.
type Start string

// The values of Start.
const (
	// StartCommand: the module is a WASI command; instantiating it runs
	// _start, start-up and tool together.
	StartCommand Start = "command"
	// StartPlain: the module is a reactor; each call instantiates it, runs
	// its initialization, then aip_call.
	StartPlain Start = "plain"
	// StartSnapshot: the reactor was initialized once, when loaded; each
	// call instantiates it from a snapshot of its memory and globals then,
	// and runs aip_call.
	StartSnapshot Start = "snapshot"
)

// StartOf is how the calls of a module of form start, given what its
// manifest's init asks: a reactor starts from a snapshot unless it asks
// for plain starts; a command cannot ask for a snapshot. aipctl tool pack
// checks a manifest with it, as Load does.
func StartOf(form abi.Form, init manifest.Init) (Start, error) {
	switch {
	case form == abi.Command && (init == "" || init == manifest.InitPlain):
		return StartCommand, nil
	case form == abi.Command:
		return "", fmt.Errorf("init %q: a WASI command (it exports %s) cannot be snapshotted; the reactor form exports %s (Go: build with -buildmode=c-shared and wasmtools/sdk/reactor)",
			init, abi.StartExport, abi.CallExport)
	case init == manifest.InitPlain:
		return StartPlain, nil
	}
	return StartSnapshot, nil
}

// runInstance runs one call of t's code: a fresh instance, started as t
// starts, from snap for a snapshot tool. It returns what ended the call
// badly, nil if nothing did.
func (s *Sandbox) runInstance(ctx context.Context, t *Tool, code wazero.CompiledModule, cfg wazero.ModuleConfig, mem *callMemory, snap *snapshot) error {
	mem.image = t.blank
	if snap != nil {
		mem.image = snap.image
	}
	if t.Start() == StartCommand {
		mod, err := s.rt.InstantiateModule(ctx, code, cfg)
		if mod != nil {
			mod.Close(context.WithoutCancel(ctx))
		}
		return err
	}
	mod, err := s.rt.InstantiateModule(ctx, code, cfg.WithStartFunctions())
	if err != nil {
		return err
	}
	defer mod.Close(context.WithoutCancel(ctx))
	if snap != nil {
		err = snap.restore(mod, mem)
	} else {
		err = initialize(ctx, mod)
	}
	if err != nil {
		return err
	}
	return callTool(ctx, mod)
}

// initialize does in mod what a reactor's initialization does: the data
// and start function of its snapshot form, if it has that form, then its
// _initialize, if it has one.
func initialize(ctx context.Context, mod api.Module) error {
	for _, name := range []string{meter.SnapshotInitExport, abi.InitExport} {
		if f := mod.ExportedFunction(name); f != nil {
			if _, err := f.Call(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// callTool calls a reactor's aip_call, whose result is the exit status:
// like a command's, any but 0 is a failure.
func callTool(ctx context.Context, mod api.Module) error {
	f := mod.ExportedFunction(abi.CallExport)
	if f == nil || len(f.Definition().ParamTypes()) != 0 || !isI32Result(f.Definition()) {
		return fmt.Errorf("%s: want an exported function () -> i32", abi.CallExport)
	}
	res, err := f.Call(ctx)
	if exit, ok := err.(*sys.ExitError); ok && exit.ExitCode() == 0 {
		return nil // proc_exit(0), as a command may end
	}
	if err != nil {
		return err
	}
	if status := uint32(res[0]); status != 0 {
		return sys.NewExitError(status)
	}
	return nil
}

func isI32Result(def api.FunctionDefinition) bool {
	r := def.ResultTypes()
	return len(r) == 1 && r[0] == api.ValueTypeI32
}
