package meter_test

import (
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
	plain := newRuntime(t, compiler)
	for _, call := range guestCalls(t) {
		want := call.run(t, plain, compile(t, plain, call.wasm), nil)
		inst := instrument(t, call.wasm, meter.Options{})
		for _, e := range engines {
			t.Run(call.name+"/"+e.name, func(t *testing.T) {
				r := newRuntime(t, e)
				got := call.run(t, r, compile(t, r, inst), meter.NewMeter(bigBudget))
				assert.Equal(t, want, got.withoutFuel())
				if got.Err == "" {
					assert.NotZero(t, got.Fuel)
				}
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
			var fuel [2]uint64
			for i, e := range engines {
				r := newRuntime(t, e)
				fuel[i] = call.run(t, r, compile(t, r, inst), meter.NewMeter(bigBudget)).Fuel
			}
			assert.Equal(t, fuel[0], fuel[1], "interpreter vs compiler")
		})
	}
}

// TestOutOfFuelStopsAtTheSamePoint gives each call half the fuel it needs
// and checks that both engines stop with the same error, at the same count,
// with the same memory and output.
func TestOutOfFuelStopsAtTheSamePoint(t *testing.T) {
	for _, call := range guestCalls(t) {
		t.Run(call.name, func(t *testing.T) {
			inst := instrument(t, call.wasm, meter.Options{})
			r := newRuntime(t, compiler)
			need := call.run(t, r, compile(t, r, inst), meter.NewMeter(bigBudget)).Fuel
			if need < 4 {
				t.Skipf("needs only %d units", need)
			}
			budget := need / 2
			var got [2]outcome
			for i, e := range engines {
				r := newRuntime(t, e)
				got[i] = call.run(t, r, compile(t, r, inst), meter.NewMeter(budget))
			}
			require.Contains(t, got[0].Err, "out of fuel after")
			assert.Equal(t, got[0], got[1], "interpreter vs compiler")
			assert.Greater(t, got[0].Fuel, budget)
			assert.LessOrEqual(t, got[0].Fuel, need)
		})
	}
}
