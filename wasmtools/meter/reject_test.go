package meter_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// Modules a reviewer found to crash Instrument, and their kin: each must
// be refused with an error that names what is wrong.
var (
	// huge is the LEB128 encoding of 2^32-1.
	huge = []byte{0xff, 0xff, 0xff, 0xff, 0x0f}
	// dataBomb is a module header and a data section of 2^32-16 segments,
	// 14 bytes in all: wazero's decoder would allocate room for them all.
	dataBomb = []byte{0, 'a', 's', 'm', 1, 0, 0, 0, 11, 5, 0xf0, 0xff, 0xff, 0xff, 0x0f}
	// localsBomb declares 2^32-1 locals in one function, in 8 bytes.
	localsBomb = slices.Concat([]byte{0, 'a', 's', 'm', 1, 0, 0, 0},
		[]byte{1, 4, 1, 0x60, 0, 0},                       // type section: () -> ()
		[]byte{3, 2, 1, 0},                                // function section
		[]byte{10, 10, 1, 8, 1}, huge, []byte{0x7f, 0x0b}) // code: 2^32-1 i32 locals
)

// paramsBomb is n functions of one type with n i32 parameters, in about
// 5n bytes: the meter's wrappers pass every parameter of every function
// on, n² instructions (a reviewer's 50 KB module made gigabytes).
func paramsBomb(n int) []byte {
	leb := func(b []byte, v int) []byte { return binary.AppendUvarint(b, uint64(v)) }
	section := func(id byte, payload []byte) []byte {
		return slices.Concat([]byte{id}, leb(nil, len(payload)), payload)
	}
	types := slices.Concat(leb([]byte{1, 0x60}, n), bytes.Repeat([]byte{0x7f}, n), []byte{0})
	funcs := slices.Concat(leb(nil, n), make([]byte, n))
	code := slices.Concat(leb(nil, n), bytes.Repeat([]byte{2, 0, 0x0b}, n))
	return slices.Concat([]byte{0, 'a', 's', 'm', 1, 0, 0, 0}, section(1, types), section(3, funcs), section(10, code))
}

// withNames returns the echo tool with a name section of the given
// subsections appended.
func withNames(t testing.TB, subsections ...byte) []byte {
	echo, err := os.ReadFile("../../testdata/tools/echo.wasm")
	require.NoError(t, err)
	payload := append([]byte{4, 'n', 'a', 'm', 'e'}, subsections...)
	return slices.Concat(echo, []byte{0, byte(len(payload))}, payload)
}

func TestInstrumentRefusesMalformedModules(t *testing.T) {
	// echo imports two functions and defines a third, _start, with one
	// local.
	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"local names of a function that does not exist", withNames(t, 2, 3, 1, 48, 0),
			"instrument: name section: local names: function 48 does not exist (the module has 3)"},
		{"name of a function that does not exist", withNames(t, 1, 4, 1, 7, 1, 'f'),
			"instrument: name section: function names: function 7 does not exist (the module has 3)"},
		{"name of a local that does not exist", withNames(t, 2, 6, 1, 2, 1, 5, 1, 'x'),
			"instrument: name section: local names: function 2: local 5 does not exist (the function has 1)"},
		{"2^32 function names", withNames(t, slices.Concat([]byte{1, 5}, huge)...),
			"instrument: invalid module: name section: function names: entry count 4294967295 does not fit in the 0 bytes left"},
		{"2^32 local names", withNames(t, slices.Concat([]byte{2, 7, 1, 2}, huge)...),
			"instrument: invalid module: name section: local names: entry 0: entry count 4294967295 does not fit in the 0 bytes left"},
		{"2^32 data segments", dataBomb,
			"instrument: invalid module: data section: segment count 4294967280 does not fit in the 0 bytes left"},
		{"2^32 locals", localsBomb,
			"instrument: invalid module: code section: function 0: 4294967295 locals with the parameters, more than 50000"},
		{"5,000 functions of 5,000 parameters", paramsBomb(5000),
			"instrument: invalid module: type section: type 0: 5000 params, more than 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := meter.Instrument(context.Background(), tc.wasm, meter.Options{})
			assert.EqualError(t, err, tc.want)
		})
	}
}
