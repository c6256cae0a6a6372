package meter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
)

// Example runs a WASI command, compiled from C, with a fuel budget and a
// deadline, the way the sandbox runs a tool call: instrument and compile
// once, then a fresh instance and a fresh Meter per call.
func Example() {
	ctx := context.Background()
	wasm, err := os.ReadFile("../../testdata/fuel/fib.wasm")
	if err != nil {
		log.Fatal(err)
	}
	// Once per module. Cache the result under a key that includes
	// meter.CostModelVersion.
	metered, err := meter.Instrument(ctx, wasm, meter.Options{})
	if err != nil {
		log.Fatal(err)
	}

	// Once per runtime.
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	if err := meter.Install(ctx, r); err != nil {
		log.Fatal(err)
	}
	compiled, err := r.CompileModule(ctx, metered)
	if err != nil {
		log.Fatal(err)
	}

	// Per call.
	for _, budget := range []uint64{1_000_000, 10_000} {
		m := meter.NewMeter(budget)
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var stdout bytes.Buffer
		cfg := wazero.NewModuleConfig().WithArgs("fib", "20").WithStdout(&stdout)
		_, err := r.InstantiateModule(meter.WithMeter(callCtx, m), compiled, cfg)
		cancel()
		switch {
		case errors.Is(err, meter.ErrOutOfFuel):
			fmt.Println("budget", budget, "->", "out of fuel, used", m.Consumed())
		case errors.Is(err, meter.ErrDeadline), errors.Is(err, meter.ErrCallDepth):
			fmt.Println("budget", budget, "->", err)
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Printf("budget %d -> %s", budget, stdout.String())
			fmt.Println("used", m.Consumed())
		}
	}
	// Output:
	// budget 1000000 -> fib(20) = 6765
	// used 262630
	// budget 10000 -> out of fuel, used 10003
}
