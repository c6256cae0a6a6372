package meter_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
)

// fixtureDir holds the modules the tests run, with their sources.
const fixtureDir = "../../testdata/fuel"

// engine is one of wazero's two execution engines.
type engine struct {
	name   string
	config func() wazero.RuntimeConfig
}

var (
	interpreter = engine{"interpreter", wazero.NewRuntimeConfigInterpreter}
	compiler    = engine{"compiler", wazero.NewRuntimeConfigCompiler}

	// hasCompiler: wazero compiles for amd64 and arm64 only; elsewhere
	// NewRuntimeConfigCompiler panics.
	hasCompiler = runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64"
	// engines are the engines this architecture has, and native the one
	// wazero picks by default.
	engines = availableEngines()
	native  = engines[len(engines)-1]
)

func availableEngines() []engine {
	if hasCompiler {
		return []engine{interpreter, compiler}
	}
	return []engine{interpreter}
}

// assertSameOnEveryEngine compares outcomes got on each of engines.
func assertSameOnEveryEngine[T any](t testing.TB, got []T) {
	t.Helper()
	for i := 1; i < len(got); i++ {
		assert.Equal(t, got[0], got[i], "%s vs %s", engines[0].name, engines[i].name)
	}
}

// watModules are the hand-written fixtures whose exports the tests call.
var watModules = []string{"loops", "br_table", "blocks", "recursion", "bulk", "multivalue", "refs", "tables", "dispatch", "traps", "counted"}

// command is a WASI command fixture and the arguments it runs with in
// tests: small, so that the interpreter gets through it quickly.
type command struct {
	file string
	args []string
}

var commands = []command{
	{"goprog/goprog.wasm", []string{"goprog", "150"}},
	{"coremark.wasm", []string{"coremark", "2"}},
	{"matmul.wasm", []string{"matmul", "12"}},
	{"sieve.wasm", []string{"sieve", "3000"}},
	{"fib.wasm", []string{"fib", "12"}},
	{"stride.wasm", []string{"stride", "3000"}},
	{"gostd/gostd.wasm", []string{"gostd", "json", "3"}},
}

// compilationCache is shared by every runtime the tests make, so that each
// module is compiled once per engine however many tests use it.
var compilationCache = wazero.NewCompilationCache()

func newRuntime(t testing.TB, e engine) wazero.Runtime {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, e.config().WithCoreFeatures(meter.CoreFeatures).WithCompilationCache(compilationCache))
	t.Cleanup(func() { _ = r.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	require.NoError(t, meter.Install(ctx, r))
	return r
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join(fixtureDir, name))
	require.NoError(t, err)
	return wasm
}

func instrument(t testing.TB, wasm []byte, opts meter.Options) []byte {
	t.Helper()
	out, err := meter.Instrument(context.Background(), wasm, opts)
	require.NoError(t, err)
	return out
}

func compile(t testing.TB, r wazero.Runtime, wasm []byte) wazero.CompiledModule {
	t.Helper()
	c, err := r.CompileModule(context.Background(), wasm)
	require.NoError(t, err)
	return c
}

// outcome is everything observable about one call: what the tests compare
// between the original and the instrumented module, and between engines.
type outcome struct {
	Results []uint64
	Err     string // first line, without wazero's "(recovered by wazero)"
	Stdout  string
	Memory  [32]byte // sha256 of the exported memory, when there is one
	Fuel    uint64   // metered calls only
}

// withoutFuel is the part of an outcome the original module can match.
func (o outcome) withoutFuel() outcome {
	o.Fuel = 0
	return o
}

func firstLine(err error) string {
	if err == nil {
		return ""
	}
	line, _, _ := strings.Cut(err.Error(), "\n")
	return strings.TrimSuffix(line, " (recovered by wazero)")
}

// meterCtx returns ctx metered by m, or ctx itself when m is nil.
func meterCtx(ctx context.Context, m *meter.Meter) context.Context {
	if m == nil {
		return ctx
	}
	return meter.WithMeter(ctx, m)
}

// callExport calls one export on a fresh instance, without running any
// start function, the way the sandbox gives every call a fresh instance.
func callExport(t testing.TB, r wazero.Runtime, c wazero.CompiledModule, export string, m *meter.Meter) outcome {
	t.Helper()
	ctx := meterCtx(context.Background(), m)
	cfg := wazero.NewModuleConfig().WithName("guest").WithStartFunctions()
	mod, err := r.InstantiateModule(ctx, c, cfg)
	require.NoError(t, err)
	defer mod.Close(ctx)
	results, err := mod.ExportedFunction(export).Call(ctx)
	if len(results) == 0 {
		results = nil // the compiler returns an empty slice, the interpreter nil
	}
	o := outcome{Results: results, Err: firstLine(err)}
	if mem := mod.ExportedMemory("memory"); mem != nil {
		b, _ := mem.Read(0, mem.Size())
		o.Memory = sha256.Sum256(b)
	}
	if m != nil {
		o.Fuel = m.Consumed()
	}
	return o
}

// runCommand instantiates a WASI command, which runs its _start.
func runCommand(t testing.TB, r wazero.Runtime, c wazero.CompiledModule, args []string, m *meter.Meter) outcome {
	t.Helper()
	var stdout bytes.Buffer
	ctx := meterCtx(context.Background(), m)
	cfg := wazero.NewModuleConfig().WithName("guest").WithArgs(args...).WithStdout(&stdout)
	mod, err := r.InstantiateModule(ctx, c, cfg)
	if mod != nil {
		_ = mod.Close(ctx)
	}
	o := outcome{Err: firstLine(err), Stdout: stdout.String()}
	if m != nil {
		o.Fuel = m.Consumed()
	}
	return o
}

// guestCall is one call the tests make into a fixture, in the original
// or the instrumented module: an export of a .wat module, or a command.
type guestCall struct {
	name string
	wasm []byte // the original module
	run  func(t testing.TB, r wazero.Runtime, c wazero.CompiledModule, m *meter.Meter) outcome
}

// guestCalls lists every export of the .wat corpus and every command.
// Exports named depth_* recurse past any limit: the original fails on the
// interpreter and succeeds on the compiler, which is the very difference
// the instrumentation removes. Exports named spin_* never return. Both
// have tests of their own.
func guestCalls(t testing.TB) []guestCall {
	var calls []guestCall
	r := newRuntime(t, interpreter)
	for _, file := range watModules {
		wasm := readFixture(t, file+".wasm")
		for _, export := range exportNames(compile(t, r, wasm)) {
			if strings.HasPrefix(export, "depth_") || strings.HasPrefix(export, "spin_") {
				continue
			}
			calls = append(calls, guestCall{file + "/" + export, wasm,
				func(t testing.TB, r wazero.Runtime, c wazero.CompiledModule, m *meter.Meter) outcome {
					return callExport(t, r, c, export, m)
				}})
		}
	}
	for _, cmd := range commands {
		calls = append(calls, guestCall{cmd.file, readFixture(t, cmd.file),
			func(t testing.TB, r wazero.Runtime, c wazero.CompiledModule, m *meter.Meter) outcome {
				return runCommand(t, r, c, cmd.args, m)
			}})
	}
	return calls
}

func exportNames(c wazero.CompiledModule) []string {
	var names []string
	for name := range c.ExportedFunctions() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
