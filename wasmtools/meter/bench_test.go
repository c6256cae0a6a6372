package meter_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
)

// benchProgram is one program of the CPU suite, sized to run for tens of
// milliseconds unmetered on wazero's compiler.
type benchProgram struct {
	name string
	file string
	args []string
}

var benchPrograms = []benchProgram{
	{"coremark", "coremark.wasm", []string{"coremark", "1500"}},
	{"matmul", "matmul.wasm", []string{"matmul", "256"}},
	{"sieve", "sieve.wasm", []string{"sieve", "2000000", "4"}},
	{"fib", "fib.wasm", []string{"fib", "34"}},
	{"goprog", "goprog/goprog.wasm", []string{"goprog", "2000"}},
}

// shifts are the placements of the machine code BenchmarkFuel times each
// program at, as meter.ShiftCode's n: as compiled, and moved 16, 32 and 48
// bytes past a 64-byte boundary (on amd64; see ShiftCode). A program's
// time moves by several percent from one placement to another, metered or
// not, so a ratio at a single placement says as much about where hot loops
// fell as about the metering.
var shifts = []int{0, 2, 6, 10}

// BenchmarkFuel runs each program of the CPU suite on wazero's compiler
// three ways, side by side in one run: unmetered and metered by this
// package, each at every placement in shifts, and unmetered under
// WithCloseOnContextDone, the mechanism metering replaces, as compiled.
// Sub-benchmarks are named prog=<program>/layout=<n>/variant=<variant> for
// benchstat -col /variant; bench.sh turns the results into ratios.
func BenchmarkFuel(b *testing.B) {
	if !hasCompiler {
		b.Skip("wazero has no compiler for " + runtime.GOARCH)
	}
	for _, p := range benchPrograms {
		wasm := readFixture(b, p.file)
		metered := instrument(b, wasm, meter.Options{})
		for layout, n := range shifts {
			plain, inst := shiftCode(b, wasm, n), shiftCode(b, metered, n)
			name := fmt.Sprintf("prog=%s/layout=%d/variant=", p.name, layout)
			b.Run(name+"unmetered", func(b *testing.B) {
				benchCommand(b, wazero.NewRuntimeConfigCompiler(), plain, p.args, false)
			})
			b.Run(name+"metered", func(b *testing.B) {
				benchCommand(b, wazero.NewRuntimeConfigCompiler(), inst, p.args, true)
			})
			if layout > 0 {
				continue // the ratio is 4-20x: placement does not matter
			}
			b.Run(name+"closeOnContextDone", func(b *testing.B) {
				benchCommand(b, wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(true), plain, p.args, false)
			})
		}
	}
}

func shiftCode(b *testing.B, wasm []byte, n int) []byte {
	b.Helper()
	out, err := meter.ShiftCode(wasm, n)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// benchCommand times instantiating a command, which runs its _start: what
// the sandbox does per tool call. Compiling is outside the timed region,
// and so is garbage collection: the collector is off while a run is timed
// and runs, untimed, between runs, because its timing varies by up to 3x
// from run to run. Besides wall time it reports the CPU time of the thread
// that ran the guest (cpu-ns/op, on Linux), which a busy machine disturbs
// far less.
func benchCommand(b *testing.B, cfg wazero.RuntimeConfig, wasm []byte, args []string, metered bool) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, cfg)
	defer r.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	if err := meter.Install(ctx, r); err != nil {
		b.Fatal(err)
	}
	compiled, err := r.CompileModule(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	modCfg := wazero.NewModuleConfig().WithArgs(args...).WithStdout(io.Discard).WithStderr(io.Discard)
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var cpu time.Duration
	cpuOK := true
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		runtime.GC()
		// Every variant runs under a deadline, as the sandbox's calls do.
		callCtx, cancel := context.WithTimeout(ctx, time.Minute)
		if metered {
			callCtx = meter.WithMeter(callCtx, meter.NewMeter(1<<62))
		}
		runtime.LockOSThread()
		before, ok1 := threadCPU()
		b.StartTimer()
		mod, err := r.InstantiateModule(callCtx, compiled, modCfg)
		b.StopTimer()
		after, ok2 := threadCPU()
		runtime.UnlockOSThread()
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		cpu += after - before
		cpuOK = cpuOK && ok1 && ok2
		_ = mod.Close(ctx)
		b.StartTimer()
	}
	if cpuOK {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
