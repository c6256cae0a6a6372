package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/wasmtools/meter"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// engines are wazero's two, as a first call could use them: the
// optimizing compiler the sandbox runs on amd64 and arm64, and the
// interpreter, which compiles a module in a fraction of the time and runs
// it tens of times slower (issue 38: could a tool's first call run under
// the interpreter while the compiler prepares it?).
var engines = []struct {
	name   string
	config func() wazero.RuntimeConfig
}{
	{"compiler", wazero.NewRuntimeConfigCompiler},
	{"interpreter", wazero.NewRuntimeConfigInterpreter},
}

// engineRuntime is a runtime of engine config with WASI and the meter's
// host module, and no compile cache.
func engineRuntime(b *testing.B, config func() wazero.RuntimeConfig) wazero.Runtime {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, config().WithCoreFeatures(meter.CoreFeatures))
	b.Cleanup(func() { r.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	if err := meter.Install(ctx, r); err != nil {
		b.Fatal(err)
	}
	return r
}

// instrumentedStockTool is name's module instrumented in the snapshot
// form, as the sandbox compiles it.
func instrumentedStockTool(b *testing.B, name string) []byte {
	wasm, err := os.ReadFile(testenv.StockTool(name))
	if err != nil {
		b.Fatal(err)
	}
	m, err := meter.InstrumentSnapshot(context.Background(), wasm, meter.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkFirstCompileOfAStockTool is what compiling a stock tool's
// instrumented module costs each engine, from scratch.
func BenchmarkFirstCompileOfAStockTool(b *testing.B) {
	m := instrumentedStockTool(b, "read_file")
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			r := engineRuntime(b, e.config)
			ctx := context.Background()
			for b.Loop() {
				code, err := r.CompileModule(ctx, m)
				if err != nil {
					b.Fatal(err)
				}
				code.Close(ctx)
			}
		})
	}
}

// BenchmarkHashFile8MiB is one call of the stock hash_file on an 8 MiB
// file under each engine, compiled beforehand: what a first call that
// does real work would cost under the interpreter.
func BenchmarkHashFile8MiB(b *testing.B) {
	dir := b.TempDir()
	data := make([]byte, 8<<20)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(dir, "f.bin"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	m := instrumentedStockTool(b, "hash_file")
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			r := engineRuntime(b, e.config)
			ctx := context.Background()
			code, err := r.CompileModule(ctx, m)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var out bytes.Buffer
				cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions().
					WithStdin(bytes.NewReader([]byte(`{"path":"/data/f.bin"}`))).WithStdout(&out).WithStderr(io.Discard).
					WithFSConfig(wazero.NewFSConfig().WithReadOnlyDirMount(dir, "/data"))
				mctx := meter.WithMeter(ctx, meter.NewMeter(1<<50, meter.WithSliceSize(sliceSize())))
				mod, err := r.InstantiateModule(mctx, code, cfg)
				if err != nil {
					b.Fatal(err)
				}
				if err := initialize(mctx, mod); err != nil {
					b.Fatal(err)
				}
				if err := callTool(mctx, mod); err != nil {
					b.Fatal(err, out.String())
				}
				mod.Close(ctx)
			}
		})
	}
}
