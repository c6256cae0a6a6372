package meter_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
)

// bigBudget is more fuel than any fixture call needs.
const bigBudget = 1 << 40

// TestInstrumentedModuleBehavesLikeOriginal runs every export of the .wat
// corpus, and every command, in the original module and in the
// instrumented one on both engines: same results, traps, output and
// memory.
func TestInstrumentedModuleBehavesLikeOriginal(t *testing.T) {
	plain := newRuntime(t, native)
	for _, call := range guestCalls(t) {
		want := call.run(t, plain, compile(t, plain, call.wasm), nil)
		inst := instrument(t, call.wasm, meter.Options{})
		for _, e := range engines {
			t.Run(call.name+"/"+e.name, func(t *testing.T) {
				r := newRuntime(t, e)
				got := call.run(t, r, compile(t, r, inst), meter.NewMeter(bigBudget))
				assert.Equal(t, want, got.withoutFuel())
			})
		}
	}
}

// TestFuelIsTheSameOnEveryEngine is what lets one budget hold across a
// fleet of interpreter and compiler hosts.
func TestFuelIsTheSameOnEveryEngine(t *testing.T) {
	for _, call := range guestCalls(t) {
		t.Run(call.name, func(t *testing.T) {
			inst := instrument(t, call.wasm, meter.Options{})
			var fuel []uint64
			for _, e := range engines {
				r := newRuntime(t, e)
				fuel = append(fuel, call.run(t, r, compile(t, r, inst), meter.NewMeter(bigBudget)).Fuel)
			}
			assertSameOnEveryEngine(t, fuel)
		})
	}
}

// TestOutOfFuelStopsAtTheSamePoint gives each call half the fuel it needs
// and checks that both engines stop with the same error, at the same count,
// with the same memory and output. The error is running out of fuel,
// unless the call traps before it reaches a check.
func TestOutOfFuelStopsAtTheSamePoint(t *testing.T) {
	for _, call := range guestCalls(t) {
		t.Run(call.name, func(t *testing.T) {
			inst := instrument(t, call.wasm, meter.Options{})
			r := newRuntime(t, native)
			full := call.run(t, r, compile(t, r, inst), meter.NewMeter(bigBudget))
			need := full.Fuel
			if need < 4 {
				t.Skipf("needs only %d units", need)
			}
			budget := need / 2
			var got []outcome
			for _, e := range engines {
				r := newRuntime(t, e)
				got = append(got, call.run(t, r, compile(t, r, inst), meter.NewMeter(budget)))
			}
			// A call that traps may get there before a check notices.
			if full.Err == "" || got[0].Err != full.Err {
				require.Contains(t, got[0].Err, "out of fuel after")
			}
			assertSameOnEveryEngine(t, got)
			assert.Greater(t, got[0].Fuel, budget)
			assert.LessOrEqual(t, got[0].Fuel, need)
		})
	}
}

// TestShiftedModulesBehaveLikeOriginal checks the benchmark's placement
// shifts (meter.ShiftCode) on every fixture call whose module has a memory:
// the .wat corpus covers element segments, ref.func, tables and traps, the
// commands real programs. Shifted, the original and the instrumented
// module give the same outcome, fuel included.
func TestShiftedModulesBehaveLikeOriginal(t *testing.T) {
	r := newRuntime(t, native)
	for _, call := range guestCalls(t) {
		t.Run(call.name, func(t *testing.T) {
			inst := instrument(t, call.wasm, meter.Options{})
			for _, m := range []struct {
				wasm  []byte
				meter func() *meter.Meter
			}{
				{call.wasm, func() *meter.Meter { return nil }},
				{inst, func() *meter.Meter { return meter.NewMeter(bigBudget) }},
			} {
				shifted, err := meter.ShiftCode(m.wasm, 2)
				if errors.Is(err, meter.ErrShiftNeedsMemory) {
					t.Skip("no memory to pad with stores")
				}
				require.NoError(t, err)
				want := call.run(t, r, compile(t, r, m.wasm), m.meter())
				assert.Equal(t, want, call.run(t, r, compile(t, r, shifted), m.meter()))
			}
		})
	}
}
