package meter_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

func instrumentSnapshot(t testing.TB, wasm []byte) []byte {
	t.Helper()
	out, err := meter.InstrumentSnapshot(context.Background(), wasm, meter.Options{})
	require.NoError(t, err)
	return out
}

// state is what a snapshot holds: memory and the exported mutable globals.
type state struct {
	memory  []byte
	globals []uint64
}

func takeSnapshot(mod api.Module) state {
	b, _ := mod.Memory().Read(0, mod.Memory().Size())
	s := state{memory: bytes.Clone(b)}
	for i := 0; ; i++ {
		g := mod.ExportedGlobal(meter.SnapshotGlobalPrefix + strconv.Itoa(i))
		if g == nil {
			return s
		}
		s.globals = append(s.globals, g.Get())
	}
}

// restore puts s into a fresh instance of the snapshot form, as a host
// that maps the image would.
func restore(t testing.TB, mod api.Module, s state) {
	t.Helper()
	mem := mod.Memory()
	_, ok := mem.Grow(uint32(len(s.memory))/65536 - mem.Size()/65536)
	require.True(t, ok)
	require.True(t, mem.Write(0, s.memory))
	for i, v := range s.globals {
		mod.ExportedGlobal(meter.SnapshotGlobalPrefix + strconv.Itoa(i)).(api.MutableGlobal).Set(v)
	}
}

func instantiate(t testing.TB, r wazero.Runtime, c wazero.CompiledModule, m *meter.Meter) api.Module {
	t.Helper()
	mod, err := r.InstantiateModule(meter.WithMeter(context.Background(), m), c, wazero.NewModuleConfig().WithName(""))
	require.NoError(t, err)
	t.Cleanup(func() { mod.Close(context.Background()) })
	return mod
}

// call calls export with its own Meter, and returns its results and fuel.
func call(t testing.TB, mod api.Module, export string) ([]uint64, uint64) {
	t.Helper()
	m := meter.NewMeter(bigBudget)
	res, err := mod.ExportedFunction(export).Call(meter.WithMeter(context.Background(), m))
	require.NoError(t, err)
	return res, m.Consumed()
}

// The fixture's initialization writes data far apart, runs a start
// function, grows memory and changes every kind of global; its run reads
// all of it and changes it. An instance started from a snapshot of the
// initialized one runs exactly as the initialized one does, fuel
// included, on every engine; and both match the module instrumented
// plainly, whose instantiation writes the data and runs the start
// function.
func TestAnInstanceStartedFromASnapshotRunsAsTheInitializedOne(t *testing.T) {
	wasm := readFixture(t, "snapshot.wasm")
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			r := newRuntime(t, e)
			form := compile(t, r, instrumentSnapshot(t, wasm))

			first := instantiate(t, r, form, nil)
			_, dataFuel := call(t, first, meter.SnapshotInitExport)
			_, initFuel := call(t, first, "_initialize")
			snap := takeSnapshot(first)
			want, runFuel := call(t, first, "run")
			again, _ := call(t, first, "run")
			require.NotEqual(t, want, again, "a run that does not start afresh returns something else")

			fresh := instantiate(t, r, form, nil)
			restore(t, fresh, snap)
			got, fuel := call(t, fresh, "run")
			assert.Equal(t, want, got)
			assert.Equal(t, runFuel, fuel, "a call from the snapshot costs what it costs after initialization")
			assert.Len(t, snap.globals, 3, "the mutable globals, not the constant nor the fuel counter")

			plainMeter := meter.NewMeter(bigBudget)
			plain := instantiate(t, r, compile(t, r, instrument(t, wasm, meter.Options{})), plainMeter)
			startFuel := plainMeter.Consumed()
			_, plainInit := call(t, plain, "_initialize")
			assert.Equal(t, sha256.Sum256(snap.memory), sha256.Sum256(takeSnapshot(plain).memory), "the same memory after initialization")
			assert.Equal(t, startFuel+plainInit, dataFuel+initFuel, "the same fuel to initialize, the data costing none")
			got, fuel = call(t, plain, "run")
			assert.Equal(t, want, got)
			assert.Equal(t, runFuel, fuel)
		})
	}
}

// The form changes nothing a command does, nor what it costs: the C and
// Go programs give the same output for the same fuel once their data is
// written by SnapshotInitExport rather than by instantiation.
func TestTheSnapshotFormKeepsOutputAndFuel(t *testing.T) {
	r := newRuntime(t, native)
	for _, cmd := range commands {
		t.Run(cmd.file, func(t *testing.T) {
			wasm := readFixture(t, cmd.file)
			want := runCommand(t, r, compile(t, r, instrument(t, wasm, meter.Options{})), cmd.args, meter.NewMeter(bigBudget))

			var stdout bytes.Buffer
			m := meter.NewMeter(bigBudget)
			ctx := meter.WithMeter(context.Background(), m)
			cfg := wazero.NewModuleConfig().WithName("").WithArgs(cmd.args...).WithStdout(&stdout).WithStartFunctions()
			mod, err := r.InstantiateModule(ctx, compile(t, r, instrumentSnapshot(t, wasm)), cfg)
			require.NoError(t, err)
			defer mod.Close(ctx)
			_, err = mod.ExportedFunction(meter.SnapshotInitExport).Call(ctx)
			require.NoError(t, err)
			_, err = mod.ExportedFunction("_start").Call(ctx)
			got := outcome{Err: firstLine(err), Stdout: stdout.String(), Fuel: m.Consumed()}
			if got.Err == "module closed with exit_code(0)" {
				got.Err = "" // as instantiation, which runs _start, reports it
			}
			assert.Equal(t, want, got)
		})
	}
}

func TestModulesASnapshotCannotCarryAreRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		wasm []byte
		want string
	}{
		"table changes":     {readFixture(t, "bulk.wasm"), "table.init changes a table, which a snapshot of memory would not hold"},
		"mutable reference": {readFixture(t, "refs.wasm"), "global 0: a mutable reference, which the host cannot carry from one instance to another"},
		// (module (memory 1) (data "x"))
		"passive data": {[]byte("\x00asm\x01\x00\x00\x00\x05\x03\x01\x00\x01\x0b\x04\x01\x01\x01x"), "data segment 0: passive: whether initialization dropped it is not in the snapshot"},
		// (module (import "env" "mem" (memory 1)))
		"imported memory": {[]byte("\x00asm\x01\x00\x00\x00\x02\x0c\x01\x03env\x03mem\x02\x00\x01"), `import "env"."mem": it imports a memory`},
		// (module (func (export "__aip_snapshot_init")) (memory 1))
		"reserved name": {[]byte("\x00asm\x01\x00\x00\x00\x01\x04\x01\x60\x00\x00\x03\x02\x01\x00\x05\x03\x01\x00\x01\x07\x17\x01\x13__aip_snapshot_init\x00\x00\x0a\x04\x01\x02\x00\x0b"), `export "__aip_snapshot_init": names starting "__aip_snapshot_" are reserved`},
		// (module)
		"no memory": {[]byte("\x00asm\x01\x00\x00\x00"), "the module defines 0 memories: a snapshot needs exactly one"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := meter.InstrumentSnapshot(context.Background(), tc.wasm, meter.Options{})
			require.ErrorIs(t, err, meter.ErrNotSnapshottable)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// FuzzInstrumentSnapshot feeds InstrumentSnapshot arbitrary bytes, as
// FuzzInstrumentBytes feeds Instrument.
func FuzzInstrumentSnapshot(f *testing.F) {
	fuzzModules(f, meter.InstrumentSnapshot)
}

// The snapshot form calls through dispatchers instead of a table, so an
// instance has no table to fill. Every export of indirect.wat returns the
// same, for the same fuel, as the plainly instrumented module on every
// engine; a recursion through the table reaches the depth limit, not the
// interpreter's stack (the dispatchers take no frame); and a slot that
// holds nothing of the type traps as an invalid table access.
func TestTheSnapshotFormCallsThroughDispatchers(t *testing.T) {
	wasm := readFixture(t, "indirect.wasm")
	form := instrumentSnapshot(t, wasm)
	sections, err := wasmbin.ReadSections(form)
	require.NoError(t, err)
	for _, s := range sections {
		assert.NotEqual(t, wasmbin.SectionElement, s.ID, "the form has no element segments")
	}
	traps := map[string]string{
		"empty_slot":   "invalid table access",
		"past_the_end": "invalid table access",
		"wrong_type":   "indirect call type mismatch",
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			r := newRuntime(t, e)
			plain := compile(t, r, instrument(t, wasm, meter.Options{}))
			direct := compile(t, r, form)
			for _, export := range exportNames(plain) {
				want := callExport(t, r, plain, export, meter.NewMeter(bigBudget))
				got := callExport(t, r, direct, export, meter.NewMeter(bigBudget))
				if trap, ok := traps[export]; ok {
					assert.Contains(t, want.Err, trap, export)
					assert.Contains(t, got.Err, "invalid table access", export)
					want.Err, got.Err = "", ""
				}
				assert.Equal(t, want, got, export)
			}
			assert.Equal(t, "call depth exceeded", callExport(t, r, direct, "depth_exceeded", meter.NewMeter(bigBudget)).Err)
		})
	}
}
