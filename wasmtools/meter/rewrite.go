package meter

import (
	"fmt"

	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// rewriter instruments one module.
type rewriter struct {
	l     *layout
	plans []funcPlan // per defined function
	body  bodyRewriter
}

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
	plans, err := analyzeCalls(l, sections, maxDepth)
	if err != nil {
		return nil, err
	}
	rw := &rewriter{l: l, plans: plans, body: bodyRewriter{l: l, maxDepth: maxDepth}}
	out := wasmbin.AppendModuleHeader(make([]byte, 0, len(wasm)+len(wasm)/4))
	for _, s := range withRequiredSections(sections) {
		s, keep, err := rw.rewriteSection(s)
		if err != nil {
			return nil, err
		}
		if keep {
			out = wasmbin.AppendSection(out, s)
		}
	}
	return out, nil
}

// withRequiredSections inserts an empty section, at its place in the
// section order, for each required section the module lacks.
func withRequiredSections(sections []wasmbin.Section) []wasmbin.Section {
	for _, id := range requiredSections {
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

func (rw *rewriter) rewriteCode(p []byte) ([]byte, error) {
	out := wasmbin.AppendU32(make([]byte, 0, len(p)+len(p)/2), uint32(len(rw.l.funcTypes)))
	err := forEachBody(p, func(i int, body []byte) error {
		var err error
		nparams := rw.l.paramCounts[rw.l.funcTypes[i]]
		if out, err = rw.body.rewrite(out, body, nparams, rw.plans[i]); err != nil {
			return fmt.Errorf("function %d: %w", rw.l.importedFuncs+uint32(i), err)
		}
		return nil
	})
	return out, err
}

// forEachBody calls fn with each function body of a code section.
func forEachBody(p []byte, fn func(i int, body []byte) error) error {
	r := wasmbin.NewReader(p)
	n, err := r.U32()
	if err != nil {
		return fmt.Errorf("code section: %w", err)
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
