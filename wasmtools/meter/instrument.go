package meter

import (
	"context"
	"errors"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
	"github.com/edgeaip/edgeaip/wasmtools/section"
)

// Call-depth limits. wazero's interpreter fails at 2000 frames, and the
// compiler much deeper, so a limit below the interpreter's makes deep
// recursion fail the same way on both. The margin leaves room for the
// frames of host functions, such as WASI's and the safepoint, above the
// deepest guest frame.
const (
	DefaultMaxCallDepth = 1000
	MaxCallDepthLimit   = 1990
)

// Options configure Instrument. The zero value is ready to use.
type Options struct {
	// MaxCallDepth bounds how deeply calls nest: the guest fails with
	// ErrCallDepth when a call would make more than MaxCallDepth counted
	// frames active. Counted are the functions that can recurse (directly
	// or through a table) and the wrappers the host and tables call
	// through; the others cannot nest without bound. If the longest chain
	// of uncounted functions could take the stack past MaxCallDepthLimit,
	// every function is counted. Zero means DefaultMaxCallDepth; more than
	// MaxCallDepthLimit is an error.
	MaxCallDepth int
}

func (o Options) maxCallDepth() (uint32, error) {
	switch {
	case o.MaxCallDepth == 0:
		return DefaultMaxCallDepth, nil
	case o.MaxCallDepth < 0 || o.MaxCallDepth > MaxCallDepthLimit:
		return 0, fmt.Errorf("MaxCallDepth %d: must be between 1 and %d", o.MaxCallDepth, MaxCallDepthLimit)
	}
	return uint32(o.MaxCallDepth), nil
}

// CoreFeatures are the features a runtime that runs instrumented modules
// must enable (wazero.RuntimeConfig.WithCoreFeatures): WebAssembly 2.0,
// and tail calls, which the snapshot form's dispatchers use so that a
// call through them takes no frame of its own (directcalls.go). Modules
// that use tail calls themselves are still refused.
const CoreFeatures = api.CoreFeaturesV2 | experimental.CoreFeaturesTailCall

// validationFeatures are wider than what Instrument accepts, so that a
// module using SIMD, threads or tail calls passes wazero's validation and
// is then rejected by the rewriter with an error naming the instruction,
// rather than by wazero with a less specific one.
const validationFeatures = api.CoreFeaturesV2 | experimental.CoreFeaturesThreads | experimental.CoreFeaturesTailCall

// Instrument validates wasm with wazero and returns the module with fuel
// metering and a call-depth limit added. Instances of the result must run
// on a wazero.Runtime prepared with Install, and every call into them needs
// a Meter attached to its context with WithMeter.
//
// The result imports HostModule.SafepointFunc and exports the counter as
// the global FuelExport; a module that already imports from HostModule or
// exports FuelExport is rejected. So is one using an instruction the cost
// model does not know: only the MVP, sign extension, non-trapping
// float-to-int conversions, bulk memory, reference types and multi-value
// are accepted. DWARF and source-map custom sections are dropped, since
// the rewrite moves code; other custom sections are kept.
//
// wasm may come from anyone: a malformed or hostile module gets an error,
// never a panic nor an allocation its size does not justify. The output
// depends only on wasm, opts and CostModelVersion.
func Instrument(ctx context.Context, wasm []byte, opts Options) (out []byte, err error) {
	defer recoverInternal(&err)
	maxDepth, err := opts.maxCallDepth()
	if err != nil {
		return nil, err
	}
	if err := validate(ctx, wasm); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("instrument: %w", err) // wazero's validation does not stop for ctx
	}
	out, err = rewrite(wasm, maxDepth)
	var unsupported *wasmbin.UnsupportedError
	switch {
	case errors.As(err, &unsupported):
		return nil, fmt.Errorf("instrument: %w: cost model %s prices only the MVP, sign extension, "+
			"non-trapping float-to-int, bulk memory, reference types and multi-value", err, CostModelVersion)
	case err != nil:
		return nil, fmt.Errorf("instrument: %w", err)
	}
	return out, nil
}

// recoverInternal turns a panic into the error *err: the last line of
// defence, should a module reach a case the rewriter does not check.
func recoverInternal(err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("instrument: internal error: %v (please report)", p)
	}
}

// validate checks wasm with wazero's decoder and validator. wazero's
// decoder sizes allocations from the counts it reads, so section.CheckBounds
// checks them first. The interpreter is used because compiling for it is
// cheap.
func validate(ctx context.Context, wasm []byte) error {
	if err := section.CheckBounds(wasm); err != nil {
		return fmt.Errorf("instrument: invalid module: %w", err)
	}
	// DWARF is left undecoded: the rewrite drops it.
	cfg := wazero.NewRuntimeConfigInterpreter().WithCoreFeatures(validationFeatures).WithDebugInfoEnabled(false)
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	defer r.Close(ctx)
	if _, err := r.CompileModule(ctx, wasm); err != nil {
		return fmt.Errorf("instrument: invalid module: %w", err)
	}
	return nil
}
