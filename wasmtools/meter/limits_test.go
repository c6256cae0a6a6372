package meter_test

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// TestDeepRecursionFailsTheSameWayOnEveryEngine: without instrumentation
// the interpreter overflows its 2000-frame stack where the compiler goes
// on; with it, both stop at the depth limit with the same error and fuel.
// It covers direct recursion, and recursion through a table that holds
// wrappers.
func TestDeepRecursionFailsTheSameWayOnEveryEngine(t *testing.T) {
	for _, tc := range []struct{ file, export string }{
		{"recursion.wasm", "depth_exceeded"},
		{"tables.wasm", "depth_through_table"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			wasm := readFixture(t, tc.file)
			orig := map[string]outcome{}
			for _, e := range engines {
				r := newRuntime(t, e)
				orig[e.name] = callExport(t, r, compile(t, r, wasm), tc.export, nil)
			}
			if hasCompiler {
				require.NotEqual(t, orig["interpreter"].Err, orig["compiler"].Err, "the engines already agree without instrumentation")
			}

			inst := instrument(t, wasm, meter.Options{})
			var got []outcome
			for _, e := range engines {
				r := newRuntime(t, e)
				got = append(got, callExport(t, r, compile(t, r, inst), tc.export, meter.NewMeter(bigBudget)))
			}
			assert.Equal(t, "call depth exceeded", got[0].Err)
			assertSameOnEveryEngine(t, got)
		})
	}
}

// TestLoopsWithFewerChecksRunOutOfFuel: loops whose back edges carry no
// check of their own still run out of fuel, at the same count on every
// engine: a state machine whose forward jumps are unchecked, and a loop
// that checks at its header because it calls an import there.
func TestLoopsWithFewerChecksRunOutOfFuel(t *testing.T) {
	for _, tc := range []struct{ file, export string }{
		{"dispatch.wasm", "spin_machine"},
		{"tables.wasm", "spin_yield"},
	} {
		t.Run(tc.export, func(t *testing.T) {
			wasm := instrument(t, readFixture(t, tc.file), meter.Options{})
			var got []outcome
			for _, e := range engines {
				r := newRuntime(t, e)
				got = append(got, callExport(t, r, compile(t, r, wasm), tc.export, meter.NewMeter(100_000)))
			}
			assert.Contains(t, got[0].Err, "out of fuel after")
			assertSameOnEveryEngine(t, got)
		})
	}
}

// TestMaxCallDepthIsConfigurable: 500 levels pass the default limit and
// fail a limit of 100.
func TestMaxCallDepthIsConfigurable(t *testing.T) {
	wasm := readFixture(t, "recursion.wasm")
	r := newRuntime(t, native)
	ok := callExport(t, r, compile(t, r, instrument(t, wasm, meter.Options{})), "deep_ok", meter.NewMeter(bigBudget))
	assert.Empty(t, ok.Err)
	limited := instrument(t, wasm, meter.Options{MaxCallDepth: 100})
	failed := callExport(t, r, compile(t, r, limited), "deep_ok", meter.NewMeter(bigBudget))
	assert.Equal(t, "call depth exceeded", failed.Err)

	_, err := meter.Instrument(context.Background(), wasm, meter.Options{MaxCallDepth: meter.MaxCallDepthLimit + 1})
	assert.ErrorContains(t, err, "MaxCallDepth")
}

// TestErrorsMatchWithErrorsIs checks the error values through what
// wazero's Call and InstantiateModule return.
func TestErrorsMatchWithErrorsIs(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, native)

	spin := compile(t, r, instrument(t, readFixture(t, "spin.wasm"), meter.Options{}))
	_, err := r.InstantiateModule(meter.WithMeter(ctx, meter.NewMeter(1000)), spin, quietConfig())
	require.ErrorIs(t, err, meter.ErrOutOfFuel)
	assert.Regexp(t, `out of fuel after \d+ units`, err.Error())
	assert.NotErrorIs(t, err, meter.ErrDeadline)

	deadline, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, err = r.InstantiateModule(meter.WithMeter(deadline, meter.NewMeter(bigBudget)), spin, quietConfig())
	require.ErrorIs(t, err, meter.ErrDeadline)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, meter.ErrOutOfFuel)

	canceled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	_, err = r.InstantiateModule(meter.WithMeter(canceled, meter.NewMeter(bigBudget)), spin, quietConfig())
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, meter.ErrDeadline)

	rec := compile(t, r, instrument(t, readFixture(t, "recursion.wasm"), meter.Options{}))
	mod, err := r.InstantiateModule(ctx, rec, wazero.NewModuleConfig())
	require.NoError(t, err)
	_, err = mod.ExportedFunction("depth_exceeded").Call(meter.WithMeter(ctx, meter.NewMeter(bigBudget)))
	assert.ErrorIs(t, err, meter.ErrCallDepth)

	_, err = mod.ExportedFunction("fib").Call(ctx)
	assert.ErrorContains(t, err, "without a Meter")
}

func quietConfig() wazero.ModuleConfig {
	return wazero.NewModuleConfig().WithStdout(io.Discard).WithStderr(io.Discard)
}

// TestConsumedIsExactAtProcExit: a command that exits through proc_exit
// never returns to its caller, yet its fuel is reported, the same on both
// engines, and within budget.
func TestConsumedIsExactAtProcExit(t *testing.T) {
	wasm := instrument(t, readFixture(t, "coremark.wasm"), meter.Options{})
	var fuel []uint64
	for _, e := range engines {
		r := newRuntime(t, e)
		c := compile(t, r, wasm)
		m := meter.NewMeter(bigBudget)
		// argv[1] of 0 iterations still prints and exits through proc_exit(0).
		o := runCommand(t, r, c, []string{"coremark", "0"}, m)
		require.Empty(t, o.Err)
		fuel = append(fuel, m.Consumed())
	}
	assert.NotZero(t, fuel[0])
	assertSameOnEveryEngine(t, fuel)

	// With exactly that budget it passes; with one unit less it does not.
	r := newRuntime(t, native)
	c := compile(t, r, wasm)
	assert.Empty(t, runCommand(t, r, c, []string{"coremark", "0"}, meter.NewMeter(fuel[0])).Err)
	assert.Contains(t, runCommand(t, r, c, []string{"coremark", "0"}, meter.NewMeter(fuel[0]-1)).Err, "out of fuel")
}

// memoryFaults are the exports of traps.wat that trap on a load or store
// out of bounds: those report the fuel counted at the last safepoint.
var memoryFaults = map[string]bool{"load": true, "store": true, "in_callee": true, "in_loop": true}

// TestConsumedCountsTheWorkBeforeATrap: a trap loses the guest's
// counter, yet each export of traps.wat, which traps after the work the
// export "work" does, reports more fuel than that work alone, and the
// same on every engine, whatever the size of the slices. A memory fault
// reports the count at the last safepoint: the same on every engine for
// one slice size.
func TestConsumedCountsTheWorkBeforeATrap(t *testing.T) {
	wasm := instrument(t, readFixture(t, "traps.wasm"), meter.Options{})
	fuelOf := func(r wazero.Runtime, c wazero.CompiledModule, export string, m *meter.Meter) (uint64, string) {
		o := callExport(t, r, c, export, m)
		return o.Fuel, o.Err
	}
	r := newRuntime(t, native)
	c := compile(t, r, wasm)
	work, err := fuelOf(r, c, "work", meter.NewMeter(bigBudget))
	require.Empty(t, err)
	require.Greater(t, work, uint64(100), "the work is a loop of 100 iterations")

	for _, export := range exportNames(c) {
		if export == "work" {
			continue
		}
		t.Run(export, func(t *testing.T) {
			slices := []uint64{7, meter.DefaultSliceSize}
			fuel := make([][]uint64, len(slices)) // by slice, then engine
			for _, e := range engines {
				r := newRuntime(t, e)
				c := compile(t, r, wasm)
				for i, slice := range slices {
					f, err := fuelOf(r, c, export, meter.NewMeter(bigBudget, meter.WithSliceSize(slice)))
					require.Contains(t, err, "wasm error:", "%s traps", export)
					fuel[i] = append(fuel[i], f)
				}
			}
			for i := range slices {
				assertSameOnEveryEngine(t, fuel[i])
			}
			if memoryFaults[export] {
				// Short by at most the slice and the code since the last check.
				assert.Greater(t, fuel[0][0]+2*slices[0], work)
				return
			}
			assert.Greater(t, fuel[0][0], work)
			assert.Equal(t, fuel[0], fuel[1], "the same whatever the slice size")
		})
	}
}

// TestSliceSizeDoesNotChangeFuel: slices only decide how often the host
// gets control.
func TestSliceSizeDoesNotChangeFuel(t *testing.T) {
	wasm := instrument(t, readFixture(t, "loops.wasm"), meter.Options{})
	r := newRuntime(t, native)
	c := compile(t, r, wasm)
	want := callExport(t, r, c, "primes", meter.NewMeter(bigBudget))
	for _, slice := range []uint64{1, 7, 1000} {
		got := callExport(t, r, c, "primes", meter.NewMeter(bigBudget, meter.WithSliceSize(slice)))
		assert.Equal(t, want, got, "slice %d", slice)
	}
	budget := want.Fuel / 3
	stop := callExport(t, r, c, "primes", meter.NewMeter(budget))
	for _, slice := range []uint64{1, 7, 1000} {
		got := callExport(t, r, c, "primes", meter.NewMeter(budget, meter.WithSliceSize(slice)))
		assert.Equal(t, stop, got, "slice %d", slice)
	}
}

// TestDeadlineStopsSpinningGuest: a guest spinning in a loop with no calls
// is stopped within 50 ms of its deadline. The bound is on the overshoot,
// measured from the deadline itself; the best of three runs is taken so
// that a loaded machine scheduling the test late does not count against
// the mechanism.
func TestDeadlineStopsSpinningGuest(t *testing.T) {
	if !hasCompiler {
		t.Skip("the 50 ms bound is for wazero's compiler; the interpreter needs smaller slices")
	}
	const limit = 50 * time.Millisecond
	r := newRuntime(t, native)
	spin := compile(t, r, instrument(t, readFixture(t, "spin.wasm"), meter.Options{}))
	best := time.Hour
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		deadline, _ := ctx.Deadline()
		_, err := r.InstantiateModule(meter.WithMeter(ctx, meter.NewMeter(bigBudget)), spin, quietConfig())
		overshoot := time.Since(deadline)
		cancel()
		require.ErrorIs(t, err, meter.ErrDeadline)
		t.Logf("returned %v after the deadline", overshoot)
		best = min(best, overshoot)
	}
	assert.Less(t, best, limit)
}

// TestSpinningGuestDoesNotStallOthers: while a guest spins, the garbage
// collector completes and another guest call runs to the end. Without
// safepoints a stop-the-world pause waits for the spinning guest, which
// here only ends when the test cancels it, after the checks.
func TestSpinningGuestDoesNotStallOthers(t *testing.T) {
	r := newRuntime(t, native)
	spin := compile(t, r, instrument(t, readFixture(t, "spin.wasm"), meter.Options{}))
	loops := compile(t, r, instrument(t, readFixture(t, "loops.wasm"), meter.Options{}))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		cfg := wazero.NewModuleConfig().WithStdout(&signalWriter{once: &sync.Once{}, ch: started})
		_, err := r.InstantiateModule(meter.WithMeter(ctx, meter.NewMeter(bigBudget)), spin, cfg)
		done <- err
	}()
	<-started

	for range 3 {
		t0 := time.Now()
		runtime.GC()
		t.Logf("GC took %v", time.Since(t0))
	}
	other := callExport(t, r, loops, "primes", meter.NewMeter(bigBudget))
	select {
	case err := <-done:
		t.Fatalf("the spinning guest ended before the checks: %v", err)
	default:
	}
	assert.Equal(t, []uint64{669}, other.Results)

	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
}

// signalWriter closes ch on the first write: the guest has started.
type signalWriter struct {
	once *sync.Once
	ch   chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.ch) })
	return len(p), nil
}

// TestMeterBindsToOneInstance: a Meter meters one instance; using it for
// a second one is an error rather than a wrong count.
func TestMeterBindsToOneInstance(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, native)
	c := compile(t, r, instrument(t, readFixture(t, "loops.wasm"), meter.Options{}))
	m := meter.NewMeter(bigBudget)
	mctx := meter.WithMeter(ctx, m)
	var mods []api.Module
	for range 2 {
		// Instantiation runs the start function, metered on its own.
		mod, err := r.InstantiateModule(meter.WithMeter(ctx, meter.NewMeter(bigBudget)), c, wazero.NewModuleConfig().WithName(""))
		require.NoError(t, err)
		mods = append(mods, mod)
	}
	_, err := mods[0].ExportedFunction("sum_small").Call(mctx)
	require.NoError(t, err)
	_, err = mods[1].ExportedFunction("sum_small").Call(mctx)
	assert.ErrorContains(t, err, "two module instances")
}

// TestConsumedIsZeroBeforeTheGuestRuns is the Meter's zero state.
func TestConsumedIsZeroBeforeTheGuestRuns(t *testing.T) {
	assert.Zero(t, meter.NewMeter(10).Consumed())
}

// TestErrorsAreDistinct: no metering error matches another, and the
// messages are the ones the issue asks for.
func TestErrorsAreDistinct(t *testing.T) {
	all := []error{meter.ErrOutOfFuel, meter.ErrCallDepth, meter.ErrDeadline}
	for i, a := range all {
		for j, b := range all {
			assert.Equal(t, i == j, errors.Is(a, b), "%v vs %v", a, b)
		}
	}
	assert.Equal(t, "call depth exceeded", meter.ErrCallDepth.Error())
	assert.Equal(t, "deadline passed", meter.ErrDeadline.Error())
}

// TestNewMeterOnReusedInstanceCountsItsOwnCall: what an earlier call left
// in the counter is not charged to, or granted to, the next Meter.
func TestNewMeterOnReusedInstanceCountsItsOwnCall(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, native)
	c := compile(t, r, instrument(t, readFixture(t, "loops.wasm"), meter.Options{}))
	instantiate := func() api.Module {
		mod, err := r.InstantiateModule(meter.WithMeter(ctx, meter.NewMeter(bigBudget)), c, wazero.NewModuleConfig().WithName(""))
		require.NoError(t, err)
		t.Cleanup(func() { _ = mod.Close(ctx) })
		return mod
	}
	call := func(mod api.Module, export string, m *meter.Meter) error {
		_, err := mod.ExportedFunction(export).Call(meter.WithMeter(ctx, m))
		return err
	}

	fresh := meter.NewMeter(bigBudget)
	require.NoError(t, call(instantiate(), "sum_small", fresh))

	reused := instantiate()
	require.NoError(t, call(reused, "primes", meter.NewMeter(bigBudget)))
	second := meter.NewMeter(bigBudget)
	require.NoError(t, call(reused, "sum_small", second))
	assert.Equal(t, fresh.Consumed(), second.Consumed())

	// The leftover slice of the first call does not stretch the budget.
	tight := meter.NewMeter(fresh.Consumed() - 1)
	assert.ErrorIs(t, call(reused, "sum_small", tight), meter.ErrOutOfFuel)
}

// TestExponentialCallTreeRunsOutOfFuel: without a loop or recursion, a
// chain of functions that each call the next twice does 2^40 calls. Calls
// go unchecked only while the work they can do without a check stays
// small, so this still runs out of fuel, and soon.
func TestExponentialCallTreeRunsOutOfFuel(t *testing.T) {
	const n = 40
	module := wasmbin.AppendModuleHeader(nil)
	section := func(id byte, payload []byte) {
		module = wasmbin.AppendSection(module, wasmbin.Section{ID: id, Payload: payload})
	}
	section(wasmbin.SectionType, []byte{1, 0x60, 0, 0})
	funcs := wasmbin.AppendU32(nil, n)
	code := wasmbin.AppendU32(nil, n)
	for i := range uint32(n) {
		funcs = append(funcs, 0)
		body := []byte{0} // no locals
		if i < n-1 {
			body = append(body, opCall)
			body = wasmbin.AppendU32(body, i+1)
			body = append(body, opCall)
			body = wasmbin.AppendU32(body, i+1)
		}
		body = append(body, opEnd)
		code = append(wasmbin.AppendU32(code, uint32(len(body))), body...)
	}
	section(wasmbin.SectionFunction, funcs)
	section(wasmbin.SectionExport, append(wasmbin.AppendName([]byte{1}, "spin_tree"), 0, 0))
	section(wasmbin.SectionCode, code)

	wasm := instrument(t, module, meter.Options{})
	var got []outcome
	for _, e := range engines {
		r := newRuntime(t, e)
		got = append(got, callExport(t, r, compile(t, r, wasm), "spin_tree", meter.NewMeter(1_000_000)))
	}
	assert.Contains(t, got[0].Err, "out of fuel after")
	assertSameOnEveryEngine(t, got)
}
