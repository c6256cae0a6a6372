package meter

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// loopsInTwin counts the loops in the twin of oneFunction's function.
func loopsInTwin(t *testing.T, wasm []byte) int {
	t.Helper()
	out, err := rewrite(wasm, DefaultMaxCallDepth)
	require.NoError(t, err)
	sections, err := wasmbin.ReadSections(out)
	require.NoError(t, err)
	loops := 0
	for _, s := range sections {
		if s.ID != wasmbin.SectionCode {
			continue
		}
		require.NoError(t, forEachBody(s.Payload, 2, func(i int, body []byte) error {
			r := wasmbin.NewReader(body)
			if _, err := readLocals(r); err != nil || i == 0 {
				return err // the wrapper
			}
			var in wasmbin.Instr
			for r.Len() > 0 {
				if err := r.ReadInstr(&in); err != nil {
					return err
				}
				if in.Op == wasmbin.OpLoop {
					loops++
				}
			}
			return nil
		}))
	}
	return loops
}

// TestCountedLoopsGetAnUnmeteredCopy checks which loops counted.go
// versions: a wrapped loop is two loops in the twin ($resume and the loop),
// a versioned one three (its unmetered copy too).
func TestCountedLoopsGetAnUnmeteredCopy(t *testing.T) {
	const (
		get, tee, add = 0x20, 0x22, 0x6a
		i32c, brIf    = 0x41, 0x0d
		ltS, ltU, ne  = 0x48, 0x49, 0x47
		gtS, divS     = 0x4a, 0x6d
	)
	loop := func(body ...byte) []byte {
		return append(append([]byte{0x03, blockEmpty}, body...), brIf, 0, 0x0b)
	}
	for _, tc := range []struct {
		name  string
		body  []byte
		loops int
	}{
		{"j < n after j += 4", loop(get, 0, i32c, 4, add, tee, 0, i32c, 100, ltS), 3},
		{"operands of the add swapped", loop(i32c, 4, get, 0, add, tee, 0, i32c, 100, ltS), 3},
		{"unsigned", loop(get, 0, i32c, 1, add, tee, 0, i32c, 100, ltU), 3},
		{"j != n after j++", loop(get, 0, i32c, 1, add, tee, 0, i32c, 100, ne), 3},
		{"j != n after j--", loop(get, 0, i32c, 0x7f, add, tee, 0, i32c, 100, ne), 3},
		{"work before the step", loop(get, 0, get, 0, 0x36, 2, 0, get, 0, i32c, 4, add, tee, 0, i32c, 100, ltS), 3},
		{"step of zero", loop(get, 0, i32c, 0, add, tee, 0, i32c, 100, ltS), 2},
		{"j != n after j += 12", loop(get, 0, i32c, 12, add, tee, 0, i32c, 96, ne), 3},
		{"j != n after j += step, a local", loop(get, 0, get, 0, add, tee, 0, i32c, 100, ne), 2},
		{"j > n", loop(get, 0, i32c, 1, add, tee, 0, i32c, 100, gtS), 2},
		{"a division in the body", loop(get, 0, i32c, 3, divS, 0x1a, get, 0, i32c, 1, add, tee, 0, i32c, 100, ltS), 2},
		{"j written twice", loop(i32c, 5, 0x21, 0, get, 0, i32c, 1, add, tee, 0, i32c, 100, ltS), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.loops, loopsInTwin(t, oneFunction(tc.body)))
		})
	}
}
