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

// TestShiftedCommandsBehaveLikeOriginal checks the benchmark's layout
// shifts (meter.ShiftCode): a shifted command, original or instrumented,
// prints what the original prints and consumes the same fuel.
func TestShiftedCommandsBehaveLikeOriginal(t *testing.T) {
	r := newRuntime(t, native)
	for _, cmd := range commands {
		t.Run(cmd.file, func(t *testing.T) {
			wasm := readFixture(t, cmd.file)
			inst := instrument(t, wasm, meter.Options{})
			want := runCommand(t, r, compile(t, r, wasm), cmd.args, nil)
			wantMetered := runCommand(t, r, compile(t, r, inst), cmd.args, meter.NewMeter(bigBudget))
			shifted, err := meter.ShiftCode(wasm, 2)
			require.NoError(t, err)
			assert.Equal(t, want, runCommand(t, r, compile(t, r, shifted), cmd.args, nil))
			shifted, err = meter.ShiftCode(inst, 2)
			require.NoError(t, err)
			assert.Equal(t, wantMetered, runCommand(t, r, compile(t, r, shifted), cmd.args, meter.NewMeter(bigBudget)))
		})
	}
}
