package meter

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// testModule assembles a module from sections given as id and payload.
func testModule(sections ...wasmbin.Section) []byte {
	out := wasmbin.AppendModuleHeader(nil)
	for _, s := range sections {
		out = wasmbin.AppendSection(out, s)
	}
	return out
}

// oneFunction is a module with one function, of type () -> (), with one
// i32 local and the given body, and the extra sections in their places.
func oneFunction(body []byte, extra ...wasmbin.Section) []byte {
	code := append([]byte{1, byte(len(body) + 4), 1, 1, valI32}, body...)
	code = append(code, byte(wasmbin.OpEnd))
	sections := []wasmbin.Section{
		{ID: wasmbin.SectionType, Payload: []byte{1, 0x60, 0, 0}},
		{ID: wasmbin.SectionFunction, Payload: []byte{1, 0}},
	}
	for _, s := range extra {
		if s.ID != wasmbin.SectionCustom && s.ID < wasmbin.SectionCode {
			sections = append(sections, s)
		}
	}
	sections = append(sections, wasmbin.Section{ID: wasmbin.SectionCode, Payload: code})
	for _, s := range extra {
		if s.ID == wasmbin.SectionCustom || s.ID > wasmbin.SectionCode {
			sections = append(sections, s)
		}
	}
	return testModule(sections...)
}

// TestRewriteChecksEveryIndex covers the indices the rewriter reads from a
// module. wazero's validation refuses most of these modules before the
// rewriter sees them; the rewriter must not count on it.
func TestRewriteChecksEveryIndex(t *testing.T) {
	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"call", oneFunction([]byte{0x10, 5}), "call: function 5 does not exist (the module has 1)"},
		{"call_indirect", oneFunction([]byte{0x41, 0, 0x11, 3, 0}), "call_indirect: type 3 does not exist (the module has 1)"},
		{"ref.func in code", oneFunction([]byte{0xd2, 9, 0x1a}), "ref.func: function 9 does not exist"},
		{"block type", oneFunction([]byte{0x02, 4, 0x0b}), "block type: type 4 does not exist"},
		{"label", oneFunction([]byte{0x0c, 3}), "label 3 does not exist (depth 1)"},
		{"br_table label", oneFunction([]byte{0x41, 0, 0x0e, 1, 0, 2}), "br_table: label 2 does not exist (depth 1)"},
		{"local", oneFunction([]byte{0x20, 2, 0x1a}), "local 2 does not exist (the function has 1)"},
		{"exported function", oneFunction(nil, wasmbin.Section{ID: wasmbin.SectionExport, Payload: []byte{1, 1, 'f', externFunc, 3}}),
			`export "f": function 3 does not exist`},
		{"exported global", oneFunction(nil, wasmbin.Section{ID: wasmbin.SectionExport, Payload: []byte{1, 1, 'g', externGlobal, 2}}),
			`export "g": global 2 does not exist (the module has 0)`},
		{"start", oneFunction(nil, wasmbin.Section{ID: wasmbin.SectionStart, Payload: []byte{7}}),
			"start section: function 7 does not exist"},
		{"element index", oneFunction(nil, wasmbin.Section{ID: wasmbin.SectionElement, Payload: []byte{1, 0, 0x41, 0, 0x0b, 1, 9}}),
			"element segment 0: item 0: function 9 does not exist"},
		{"element expression", oneFunction(nil, wasmbin.Section{ID: wasmbin.SectionElement, Payload: []byte{1, 5, refFunc, 1, 0xd2, 9, 0x0b}}),
			"element segment 0: item 0: constant expression: ref.func: function 9 does not exist"},
		{"global initializer", oneFunction(nil, wasmbin.Section{ID: wasmbin.SectionGlobal, Payload: []byte{1, refFunc, 0, 0xd2, 9, 0x0b}}),
			"constant expression: ref.func: function 9 does not exist"},
		{"function type", testModule(wasmbin.Section{ID: wasmbin.SectionFunction, Payload: []byte{1, 0}}),
			"function 0: type 0 does not exist (the module has 0)"},
		{"bodies", testModule(
			wasmbin.Section{ID: wasmbin.SectionType, Payload: []byte{1, 0x60, 0, 0}},
			wasmbin.Section{ID: wasmbin.SectionFunction, Payload: []byte{1, 0}},
			wasmbin.Section{ID: wasmbin.SectionCode, Payload: []byte{2, 2, 0, 0x0b, 2, 0, 0x0b}}),
			"code section: 2 bodies for 1 functions"},
		{"function name", oneFunction(nil, wasmbin.Section{Name: "name", Payload: []byte{1, 4, 1, 1, 1, 'f'}}),
			"name section: function names: function 1 does not exist"},
		{"local name", oneFunction(nil, wasmbin.Section{Name: "name", Payload: []byte{2, 6, 1, 0, 1, 1, 1, 'x'}}),
			"name section: local names: function 0: local 1 does not exist (the function has 1)"},
		{"vector count", testModule(wasmbin.Section{ID: wasmbin.SectionType, Payload: []byte{0xff, 0xff, 0xff, 0xff, 0x0f}}),
			"type section: count 4294967295 at offset 0: 0 bytes left"},
		{"name map count", oneFunction(nil, wasmbin.Section{Name: "name", Payload: []byte{1, 5, 0xff, 0xff, 0xff, 0xff, 0x0f}}),
			"name section: function names: count 4294967295 at offset 0: 0 bytes left"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rewrite(tc.wasm, DefaultMaxCallDepth)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestRecoverInternalTurnsAPanicIntoAnError(t *testing.T) {
	err := func() (err error) {
		defer recoverInternal(&err)
		panic("boom")
	}()
	assert.EqualError(t, err, "instrument: internal error: boom (please report)")
}
