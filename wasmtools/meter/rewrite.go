package meter

import (
	"fmt"
	"math"

	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// rewriter instruments one module.
type rewriter struct {
	l     *layout
	plans []funcPlan // per defined function
	body  bodyRewriter
}

// maxSectionSize is the most a section can hold: its size is a u32, which
// for a custom section also counts its name and the name's length.
const maxSectionSize = math.MaxUint32 - 5

// requiredSections are the sections the instrumentation adds entries to;
// an empty one is made up when the module has none.
var requiredSections = []byte{wasmbin.SectionType, wasmbin.SectionImport, wasmbin.SectionGlobal, wasmbin.SectionExport}

// rewrite instruments a module that wazero has validated.
func rewrite(wasm []byte, maxDepth uint32) ([]byte, error) {
	sections, err := wasmbin.ReadSections(wasm)
	if err != nil {
		return nil, err
	}
	l, err := newLayout(sections)
	if err != nil {
		return nil, err
	}
	g, err := analyzeCalls(l, sections)
	if err != nil {
		return nil, err
	}
	// Twins can go straight into tables, and call_indirect can pass the
	// counter, when no table is visible from outside the module (where
	// the host or another module could call through it with the original
	// types) and no import is in one (an import has no twin).
	l.directTables = !g.sharedRefs && !g.importRefs
	l.addTypes(g.indirectTypes)
	plans := g.plan(maxDepth)
	rw := &rewriter{l: l, plans: plans, body: bodyRewriter{l: l, maxDepth: maxDepth, plans: plans, forward: map[int]bool{}}}
	out := wasmbin.AppendModuleHeader(make([]byte, 0, len(wasm)+len(wasm)/4))
	for _, s := range withSections(sections, requiredSections...) {
		s, keep, err := rw.rewriteSection(s)
		if err != nil {
			return nil, err
		}
		if !keep {
			continue
		}
		// Twins double the code: a section near the size limit could
		// outgrow it.
		if uint64(len(s.Name))+uint64(len(s.Payload)) > maxSectionSize {
			return nil, fmt.Errorf("section %d: instrumented, it would take %d bytes, more than a section can hold", s.ID, len(s.Payload))
		}
		out = wasmbin.AppendSection(out, s)
	}
	return out, nil
}

// withSections inserts an empty section, at its place in the section
// order, for each of ids the module lacks.
func withSections(sections []wasmbin.Section, ids ...byte) []wasmbin.Section {
	for _, id := range ids {
		at := len(sections)
		for i, s := range sections {
			if s.ID == id {
				at = -1
				break
			}
			if s.ID != wasmbin.SectionCustom && wasmbin.Order(s.ID) > wasmbin.Order(id) {
				at = i
				break
			}
		}
		if at >= 0 {
			empty := wasmbin.Section{ID: id, Payload: []byte{0}}
			sections = append(sections[:at:at], append([]wasmbin.Section{empty}, sections[at:]...)...)
		}
	}
	return sections
}

// rewriteCode replaces each body with its wrapper and appends the twins,
// which hold the instrumented bodies.
func (rw *rewriter) rewriteCode(p []byte) ([]byte, error) {
	n := len(rw.l.funcTypes)
	out := wasmbin.AppendU32(make([]byte, 0, 2*len(p)), uint32(2*n))
	for i := range n {
		out = rw.appendWrapper(out, uint32(i))
	}
	err := forEachBody(p, n, func(i int, body []byte) error {
		var err error
		if out, err = rw.body.rewrite(out, body, rw.l.funcTypes[i], rw.plans[i]); err != nil {
			return fmt.Errorf("function %d: %w", rw.l.importedFuncs+uint32(i), err)
		}
		return nil
	})
	return out, err
}

// appendWrapper appends the body that takes defined function i's place:
// it passes its parameters and the counter to the twin, one call deeper,
// and stores the counter the twin returns, with its own level and the
// twin's, if the twin counts, taken off the depth.
//
//	i32.const 2; call $safepoint           ;; exported and start functions only
//	local.get 0 ... local.get n-1
//	global.get $counter; i64.const 1; i64.add
//	call $twin
//	i64.const 1 (2); i64.sub; global.set $counter
//
// The safepoint on entry is how a Meter learns its instance, and it checks
// the budget and deadline before the guest runs at all.
//
// The wrapper is a frame of its own, so it counts against the depth even
// when its twin does not: calls through tables then cannot nest twice as
// deep as the limit says.
func (rw *rewriter) appendWrapper(dst []byte, i uint32) []byte {
	body := []byte{0} // no locals
	if rw.plans[i].hostEntry {
		body = append(body, byte(wasmbin.OpI32Const), reasonEnter)
		body = appendOp(body, wasmbin.OpCall, rw.l.safepointFunc)
	}
	for p := range uint32(len(rw.l.types[rw.l.funcTypes[i]].params)) {
		body = appendOp(body, wasmbin.OpLocalGet, p)
	}
	body = appendOp(body, wasmbin.OpGlobalGet, rw.l.counterGlobal)
	body = append(body, byte(wasmbin.OpI64Const), 1, byte(wasmbin.OpI64Add))
	body = appendOp(body, wasmbin.OpCall, rw.l.twin(rw.l.importedFuncs+i))
	levels := byte(1)
	if rw.plans[i].countDepth {
		levels++
	}
	body = append(body, byte(wasmbin.OpI64Const), levels, byte(wasmbin.OpI64Sub))
	body = appendOp(body, wasmbin.OpGlobalSet, rw.l.counterGlobal)
	body = append(body, byte(wasmbin.OpEnd))
	dst = wasmbin.AppendU32(dst, uint32(len(body)))
	return append(dst, body...)
}

// forEachBody calls fn with each function body of a code section, which
// must hold one for each of the want functions the function section
// declares.
func forEachBody(p []byte, want int, fn func(i int, body []byte) error) error {
	r := wasmbin.NewReader(p)
	n, err := r.Count(1)
	if err != nil {
		return fmt.Errorf("code section: %w", err)
	}
	if uint64(n) != uint64(want) {
		return fmt.Errorf("code section: %d bodies for %d functions", n, want)
	}
	for i := range int(n) {
		size, err := r.U32()
		if err != nil {
			return fmt.Errorf("code entry %d: %w", i, err)
		}
		body, err := r.Bytes(int(size))
		if err != nil {
			return fmt.Errorf("code entry %d: %w", i, err)
		}
		if err := fn(i, body); err != nil {
			return err
		}
	}
	return nil
}
