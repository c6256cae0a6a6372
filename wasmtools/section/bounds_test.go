package section

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// module assembles a module from sections made by sec.
func module(sections ...[]byte) []byte {
	out := append([]byte{}, header...)
	for _, s := range sections {
		out = append(out, s...)
	}
	return out
}

// sec encodes one section: its id, its size and its payload.
func sec(id byte, payload ...byte) []byte {
	out := binary.AppendUvarint([]byte{id}, uint64(len(payload)))
	return append(out, payload...)
}

// nameSec encodes a name section holding the given subsections.
func nameSec(subsections ...[]byte) []byte {
	payload := []byte{4, 'n', 'a', 'm', 'e'}
	for _, s := range subsections {
		payload = append(payload, s...)
	}
	return sec(IDCustom, payload...)
}

// huge is the LEB128 encoding of 2^32-1.
var huge = []byte{0xff, 0xff, 0xff, 0xff, 0x0f}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestCheckBoundsAcceptsEveryFixture(t *testing.T) {
	var files []string
	for _, pattern := range []string{"testdata/tools/*.wasm", "testdata/fuel/*.wasm", "testdata/fuel/*/*.wasm"} {
		found, err := filepath.Glob(filepath.Join("..", "..", pattern))
		require.NoError(t, err)
		files = append(files, found...)
	}
	require.NotEmpty(t, files)
	for _, f := range files {
		wasm, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.NoError(t, CheckBounds(wasm), f)
	}
}

// TestCheckBoundsRefusesCountsPastTheEnd covers, section by section, the
// counts and lengths a decoder would size an allocation from.
func TestCheckBoundsRefusesCountsPastTheEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"data count", module(sec(11, 0xf0, 0xff, 0xff, 0xff, 0x0f)),
			"data section: segment count 4294967280 does not fit in the 0 bytes left"},
		{"data bytes", module(sec(11, cat([]byte{1, 1}, huge)...)),
			"data section: segment 0: 4294967295 bytes do not fit in the 0 bytes left"},
		{"type count", module(sec(1, huge...)), "type section: type count 4294967295"},
		{"param count", module(sec(1, cat([]byte{1, 0x60}, huge, []byte{0})...)),
			"type section: type 0: param count 4294967295 does not fit in the 1 bytes left"},
		{"import name", module(sec(2, cat([]byte{1}, huge)...)),
			"import section: import 0: name: length runs past the section"},
		{"function count", module(sec(3, huge...)), "function section: function count"},
		{"table count", module(sec(4, huge...)), "table section: table count"},
		{"memory count", module(sec(5, huge...)), "memory section: memory count"},
		{"global count", module(sec(6, huge...)), "global section: global count"},
		{"export count", module(sec(7, huge...)), "export section: export count"},
		{"element count", module(sec(9, huge...)), "element section: segment count"},
		{"element items", module(sec(9, cat([]byte{1, 1, 0}, huge)...)),
			"element section: segment 0: item count 4294967295"},
		{"code count", module(sec(10, huge...)), "code section: function count"},
		{"code size", module(sec(10, cat([]byte{1}, huge)...)),
			"code section: function 0: 4294967295 bytes do not fit in the 0 bytes left"},
		{"local groups", module(sec(10, cat([]byte{1, 6}, huge, []byte{0x0b})...)),
			"code section: function 0: local group count 4294967295 does not fit in the 1 bytes left"},
		{"2^32 locals", module(sec(10, cat([]byte{1, 8, 1}, huge, []byte{0x7f, 0x0b})...)),
			"code section: function 0: 4294967295 locals with the parameters, more than 50000"},
		{"name subsection size", module(nameSec(cat([]byte{1}, huge))),
			"name section: function names: 4294967295 bytes do not fit"},
		{"function names count", module(nameSec(cat([]byte{1, 5}, huge))),
			"name section: function names: entry count 4294967295"},
		{"local names count", module(nameSec(cat([]byte{2, 7, 1, 0}, huge))),
			"name section: local names: entry 0: entry count 4294967295"},
		{"module name shorter than its subsection", module(nameSec([]byte{0, 3, 1, 'm', 0})),
			"name section: module name: 1 bytes after its end"},
		{"type form", module(sec(1, 1, 0x4e, 0, 0)), "type section: type 0: form 0x4e is not a function type"},
		{"typed reference", module(sec(1, 1, 0x60, 1, 0x63, 0)), "type 0: param 0: value type 0x63 is not supported"},
		{"memory64", module(sec(5, 1, 0x04, 1)), "memory section: memory 0: limits flags 0x04 are not supported"},
		{"trailing bytes", module(sec(3, 0, 0)), "function section: 1 bytes after the last entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorContains(t, CheckBounds(tc.wasm), tc.want)
		})
	}
}

// codeWithLocals is a code section of n functions that each declare
// locals i32 locals.
func codeWithLocals(n int, locals uint64) []byte {
	entry := binary.AppendUvarint([]byte{1}, locals)
	entry = append(entry, 0x7f, 0x0b)
	payload := binary.AppendUvarint(nil, uint64(n))
	for range n {
		payload = binary.AppendUvarint(payload, uint64(len(entry)))
		payload = append(payload, entry...)
	}
	return sec(10, payload...)
}

func TestCheckBoundsLimitsLocals(t *testing.T) {
	assert.NoError(t, CheckBounds(module(codeWithLocals(1, MaxFunctionLocals))))
	assert.EqualError(t, CheckBounds(module(codeWithLocals(1, MaxFunctionLocals+1))),
		"code section: function 0: 50001 locals with the parameters, more than 50000")
	full := MaxModuleLocals / MaxFunctionLocals
	assert.NoError(t, CheckBounds(module(codeWithLocals(full, MaxFunctionLocals))))
	assert.EqualError(t, CheckBounds(module(codeWithLocals(full+1, MaxFunctionLocals))),
		"code section: function 20: functions so far have 1050000 locals together with their parameters, more than 1000000")
}

// typeWithParams is a type section of one function type with n i32
// parameters and no results.
func typeWithParams(n uint64) []byte {
	payload := binary.AppendUvarint([]byte{1, 0x60}, n)
	payload = append(payload, bytes.Repeat([]byte{0x7f}, int(n))...)
	return sec(1, append(payload, 0)...)
}

// functionsOfType0 is a function section of n functions of type 0.
func functionsOfType0(n int) []byte {
	return sec(3, append(binary.AppendUvarint(nil, uint64(n)), make([]byte, n)...)...)
}

// A type is declared once and shared by any number of functions, so its
// parameters count against the limits for every function of the type: a
// module of 50 KB with 10,000 functions of 10,000 parameters each made the
// meter write gigabytes.
func TestCheckBoundsCountsParametersAsLocals(t *testing.T) {
	assert.NoError(t, CheckBounds(module(typeWithParams(MaxParams))))
	assert.EqualError(t, CheckBounds(module(typeWithParams(MaxParams+1))),
		"type section: type 0: 1001 params, more than 1000")

	assert.EqualError(t, CheckBounds(module(typeWithParams(MaxParams), functionsOfType0(1),
		codeWithLocals(1, MaxFunctionLocals-MaxParams+1))),
		"code section: function 0: 50001 locals with the parameters, more than 50000")
	n := MaxModuleLocals / MaxParams
	assert.NoError(t, CheckBounds(module(typeWithParams(MaxParams), functionsOfType0(n), codeWithLocals(n, 0))))
	assert.EqualError(t, CheckBounds(module(typeWithParams(MaxParams), functionsOfType0(n+1), codeWithLocals(n+1, 0))),
		"code section: function 1000: functions so far have 1001000 locals together with their parameters, more than 1000000")
}

func TestCheckBoundsWalksEveryEncoding(t *testing.T) {
	wasm := module(
		sec(1, 1, 0x60, 2, 0x7f, 0x7b, 1, 0x6f),
		sec(2, 2, 1, 'm', 1, 't', 0x01, 0x70, 0x00, 1, 1, 'm', 1, 's', 0x02, 0x03, 1, 2),
		sec(3, 1, 0),
		sec(6, 2, 0x7b, 0, 0xfd, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0b,
			0x70, 0, 0xd0, 0x70, 0x0b),
		sec(9, 4,
			0, 0x41, 0, 0x0b, 1, 0, // active, table 0, indices
			2, 1, 0x41, 0, 0x0b, 0, 1, 0, // active, table 1, kind, indices
			5, 0x70, 1, 0xd2, 0, 0x0b, // passive, expressions
			7, 0x6f, 1, 0xd0, 0x6f, 0x0b), // declarative, expressions
		sec(12, 2),
		sec(10, 1, 4, 1, 2, 0x7e, 0x0b),
		sec(11, 2, 1, 2, 'h', 'i', 2, 0, 0x41, 8, 0x0b, 1, '!'),
		nameSec([]byte{0, 2, 1, 'm'}, []byte{1, 4, 1, 0, 1, 'f'}, []byte{2, 5, 1, 0, 1, 0, 0}, []byte{7, 2, 'x', 'y'}),
	)
	assert.NoError(t, CheckBounds(wasm))
}
