package meter_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
)

// FuzzInstrument feeds modules from the grammar in gen_test.go to
// Instrument and checks that the result validates, computes what the
// original computes (results, trap, memory), and consumes the same fuel on
// the interpreter and the compiler.
func FuzzInstrument(f *testing.F) {
	f.Add([]byte{})
	seeds := rand.New(rand.NewPCG(1, 2))
	for range 16 {
		b := make([]byte, 256)
		for i := range b {
			b[i] = byte(seeds.Uint32())
		}
		f.Add(b)
	}
	ctx := context.Background()
	// Runtimes without a compilation cache, so that a long fuzzing run
	// does not keep every module it compiled.
	var runtimes []wazero.Runtime
	for _, e := range engines {
		runtimes = append(runtimes, newUncachedRuntime(f, e.config()))
	}
	interp := runtimes[0]
	f.Fuzz(func(t *testing.T, data []byte) {
		wasm := generateModule(data)
		orig, err := interp.CompileModule(ctx, wasm)
		require.NoError(t, err, "the generator made an invalid module")
		defer orig.Close(ctx)
		inst, err := meter.Instrument(ctx, wasm, meter.Options{})
		require.NoError(t, err)

		want := callExport(t, interp, orig, "run", nil)
		var got []outcome
		for _, r := range runtimes {
			c, err := r.CompileModule(ctx, inst)
			require.NoError(t, err, "the instrumented module is invalid")
			got = append(got, callExport(t, r, c, "run", meter.NewMeter(bigBudget)))
			require.NoError(t, c.Close(ctx))
		}
		require.Equal(t, want, got[0].withoutFuel())
		assertSameOnEveryEngine(t, got)
	})
}

func newUncachedRuntime(tb testing.TB, cfg wazero.RuntimeConfig) wazero.Runtime {
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, cfg.WithCoreFeatures(meter.CoreFeatures))
	tb.Cleanup(func() { _ = r.Close(ctx) })
	require.NoError(tb, meter.Install(ctx, r))
	return r
}

// FuzzInstrumentBytes feeds Instrument arbitrary bytes, starting from the
// fixtures and the modules that once crashed it (testdata/fuzz). Whatever
// it gets, it must return an error or a module wazero compiles: never
// panic (which Instrument would report as an internal error), nor run out
// of memory.
func FuzzInstrumentBytes(f *testing.F) {
	fuzzModules(f, meter.Instrument)
}

// fuzzModules fuzzes instrument, from the fixtures: whatever it gets, it
// must return an error or a module wazero compiles.
func fuzzModules(f *testing.F, instrument func(context.Context, []byte, meter.Options) ([]byte, error)) {
	for _, pattern := range []string{fixtureDir + "/*.wasm", "../../testdata/tools/*.wasm"} {
		files, err := filepath.Glob(pattern)
		require.NoError(f, err)
		for _, file := range files {
			wasm, err := os.ReadFile(file)
			require.NoError(f, err)
			f.Add(wasm)
		}
	}
	ctx := context.Background()
	r := newUncachedRuntime(f, interpreter.config())
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, err := instrument(ctx, wasm, meter.Options{})
		if err != nil {
			require.NotContains(t, err.Error(), "internal error")
			return
		}
		c, err := r.CompileModule(ctx, out)
		require.NoError(t, err, "the instrumented module is invalid")
		require.NoError(t, c.Close(ctx))
	})
}
