// Package meter adds deterministic fuel metering, deadline enforcement and
// a call-depth limit to WebAssembly modules run under wazero.
//
// wazero has no fuel, and its only way to stop a running guest,
// WithCloseOnContextDone, makes compiled code 4-21x slower on this
// package's benchmarks. Without it, a spinning guest cannot be stopped and
// holds up Go's garbage collector for as long as it runs. This package instead rewrites each module before it
// is compiled (Instrument), so that the guest counts its own fuel and
// calls into the host (Install) every slice of fuel. At each such
// safepoint the host checks the budget and the context's deadline, and
// the Go scheduler and garbage collector get a chance to run.
//
// Fuel counts are a property of the instrumented code, not of the engine:
// a call consumes the same fuel, and runs out at the same instruction,
// under wazero's interpreter and its compiler, on every architecture.
//
// Per call:
//
//	m := meter.NewMeter(budget)
//	mod, err := r.InstantiateModule(meter.WithMeter(ctx, m), compiled, cfg)
//	usage := m.Consumed()
//	switch {
//	case errors.Is(err, meter.ErrOutOfFuel): // "out of fuel after N units"
//	case errors.Is(err, meter.ErrDeadline):
//	case errors.Is(err, meter.ErrCallDepth):
//	}
//
// RATIONALE.md explains the design and the alternatives rejected.
package meter
