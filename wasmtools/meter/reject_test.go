package meter_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
)

// TestInstrumentRejects covers the modules Instrument refuses, each with
// an error that says why.
func TestInstrumentRejects(t *testing.T) {
	for _, tc := range []struct {
		file string
		want string
	}{
		{"reject/simd.wasm", "(SIMD) at body offset"},
		{"reject/threads.wasm", "(threads) at body offset"},
		{"reject/tailcall.wasm", "(tail calls) at body offset"},
		{"reject/reserved_export.wasm", `export "__fuel": the name is reserved`},
		{"reject/reserved_import.wasm", `module name "edgeaip_meter" is reserved`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, err := meter.Instrument(context.Background(), readFixture(t, tc.file), meter.Options{})
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

// TestInstrumentValidatesFirst: a module wazero rejects never reaches the
// rewriter.
func TestInstrumentValidatesFirst(t *testing.T) {
	wasm := append([]byte{}, readFixture(t, "loops.wasm")...)
	wasm = wasm[:len(wasm)-3] // truncate the last section
	_, err := meter.Instrument(context.Background(), wasm, meter.Options{})
	assert.ErrorContains(t, err, "invalid module")
}
