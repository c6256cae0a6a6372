package meter_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
)

// benchProgram is one program of the CPU suite, sized to run for tens to
// hundreds of milliseconds unmetered on wazero's compiler.
type benchProgram struct {
	name string
	file string // relative to the fixture directory, or to the -fuel.suite directory
	args []string
}

// benchPrograms are the committed programs: the five the meter was designed
// on, a sieve-like fixture of its worst case, and workloads of Go's
// standard library nobody tuned it for.
var benchPrograms = []benchProgram{
	{"coremark", "coremark.wasm", []string{"coremark", "1500"}},
	{"matmul", "matmul.wasm", []string{"matmul", "256"}},
	{"sieve", "sieve.wasm", []string{"sieve", "2000000", "4"}},
	{"fib", "fib.wasm", []string{"fib", "34"}},
	{"goprog", "goprog/goprog.wasm", []string{"goprog", "2000"}},
	{"stride", "stride.wasm", []string{"stride", "1000000", "4"}},
	{"go-flate", "gostd/gostd.wasm", []string{"gostd", "flate"}},
	{"go-sha256", "gostd/gostd.wasm", []string{"gostd", "sha256"}},
	{"go-json", "gostd/gostd.wasm", []string{"gostd", "json"}},
	{"go-regexp", "gostd/gostd.wasm", []string{"gostd", "regexp"}},
	{"go-xml", "gostd/gostd.wasm", []string{"gostd", "xml"}},
}

var (
	// suiteDir adds programs that are not committed, such as PolyBench/C
	// built from its upstream sources: suite.txt in that directory lists
	// one per line as "name file args...", file relative to it.
	suiteDir = flag.String("fuel.suite", "", "directory with a suite.txt of more programs for BenchmarkFuel")
	// withCCD times WithCloseOnContextDone too: at 4-20x it is the
	// slowest part of a round, and its ratio does not depend on this package.
	withCCD = flag.Bool("fuel.ccd", true, "also time each program under WithCloseOnContextDone")
)

// suitePrograms returns the committed programs and those -fuel.suite lists,
// each with the directory its file is in.
func suitePrograms(b *testing.B) (progs []benchProgram, dirs []string) {
	for _, p := range benchPrograms {
		progs, dirs = append(progs, p), append(dirs, fixtureDir)
	}
	if *suiteDir == "" {
		return progs, dirs
	}
	list, err := os.ReadFile(filepath.Join(*suiteDir, "suite.txt"))
	if err != nil {
		b.Fatalf("-fuel.suite: %v", err)
	}
	for i, line := range strings.Split(string(list), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "#"):
			continue
		case len(f) < 2:
			b.Fatalf("-fuel.suite: suite.txt line %d: want \"name file args...\", got %q", i+1, line)
		}
		progs = append(progs, benchProgram{f[0], f[1], f[2:]})
		dirs = append(dirs, *suiteDir)
	}
	return progs, dirs
}

// shifts are the placements of the machine code BenchmarkFuel times each
// program at, as meter.ShiftCode's n: as compiled, and moved 16, 32 and 48
// bytes past a 64-byte boundary (on amd64; see ShiftCode). A program's
// time moves by several percent from one placement to another, metered or
// not, so a ratio at a single placement says as much about where hot loops
// fell as about the metering.
var shifts = []int{0, 2, 6, 10}

// BenchmarkFuel runs each program of the CPU suite (and of -fuel.suite) on
// wazero's compiler three ways, side by side in one run: unmetered and metered by this
// package, each at every placement in shifts, and unmetered under
// WithCloseOnContextDone, the mechanism metering replaces, as compiled.
// Sub-benchmarks are named prog=<program>/layout=<n>/variant=<variant> for
// benchstat -col /variant; bench.sh turns the results into ratios.
func BenchmarkFuel(b *testing.B) {
	if !hasCompiler {
		b.Skip("wazero has no compiler for " + runtime.GOARCH)
	}
	progs, dirs := suitePrograms(b)
	for i, p := range progs {
		wasm, err := os.ReadFile(filepath.Join(dirs[i], p.file))
		if err != nil {
			b.Fatal(err)
		}
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
			if layout > 0 || !*withCCD {
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
// and done once per module and configuration in a process (the workloads
// of gostd share one module), and so is garbage collection: the collector
// is off while a run is timed and runs, untimed, between runs, because its
// timing varies by up to 3x from run to run. Besides wall time it reports the CPU time of the thread
// that ran the guest (cpu-ns/op, on Linux), which a busy machine disturbs
// far less.
func benchCommand(b *testing.B, cfg wazero.RuntimeConfig, wasm []byte, args []string, metered bool) {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, cfg.WithCompilationCache(compilationCache))
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
