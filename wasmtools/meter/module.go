package meter

import (
	"fmt"
	"slices"

	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// Names the instrumented module uses to talk to the host. A module that
// already uses them is rejected, so the guest cannot tamper with its own
// metering.
const (
	// HostModule is the import module Install registers.
	HostModule = "edgeaip_meter"
	// SafepointFunc is the one function the instrumented code imports from
	// HostModule: (func (param i32)), the i32 being the reason for the
	// call: 0 the slice is used up, 1 the call depth is exceeded, 2 the
	// host is calling in.
	SafepointFunc = "safepoint"
	// FuelExport is the exported mutable i64 global through which the
	// guest and the host share the counter: the fuel left in the current
	// slice, shifted left 16 bits, with the call depth in the low 16. The
	// guest keeps the counter in a local and stores it here before every
	// call into the host.
	FuelExport = "__fuel"
)

// The fewest bytes an entry of some vectors takes, which bounds how many
// entries a vector of a given size can hold.
const (
	minTypeSize   = 3 // 0x60, no params, no results
	minImportSize = 4 // two empty names, the kind, one byte of description
	minGlobalSize = 3 // type, mutability, end
	minExportSize = 3 // empty name, kind, index
)

// Reference types.
const (
	refFunc   = 0x70
	refExtern = 0x6f
)

// Import and export kinds.
const (
	externFunc   = 0x00
	externTable  = 0x01
	externMemory = 0x02
	externGlobal = 0x03
	externTag    = 0x04
)

// funcType is a function type, its value types one byte each, as they
// are for every feature the rewriter accepts.
type funcType struct {
	params, results []byte
}

// layout is what the rewriter learns about the module's index spaces, and
// where what it adds lands in them.
//
// Every defined function f gets a twin, appended after all defined
// functions, that takes and returns the counter as an extra i64: calls
// between twins pass the counter in a register instead of through memory.
// f's own index keeps f's type and becomes a wrapper that loads the
// counter, calls the twin and stores the counter back, for the calls that
// must keep f's type: from the host through exports and the start
// function, and through tables that the host or another module can see.
type layout struct {
	types          []funcType
	funcTypes      []uint32 // per defined function
	localCounts    []uint32 // per defined function: locals declared, parameters not included
	importedFuncs  uint32
	importedTables uint32
	globalTypes    []byte // value type of each global, imported first
	definedGlobals int

	// directTables: tables, ref.func and funcref globals hold twins
	// rather than wrappers, and call_indirect passes the counter like a
	// direct call. rewrite decides, from what the call graph saw.
	directTables bool

	addedTypes    [][]byte          // encoded, numbered from len(types)
	twinTypes     map[uint32]uint32 // function type → (params, i64) → (results, i64)
	resultTypes   map[uint32]uint32 // function type with several results → () → (results)
	safepointType uint32
	safepointFunc uint32 // the appended import, after the original imports
	counterGlobal uint32
}

// remapFunc moves an original function index past the appended import. A
// defined function's new index is its wrapper.
func (l *layout) remapFunc(f uint32) uint32 {
	if f >= l.importedFuncs {
		return f + 1
	}
	return f
}

// twin is the index of defined function f's twin; f is an original index.
func (l *layout) twin(f uint32) uint32 {
	return f + 1 + uint32(len(l.funcTypes))
}

// checkFunc fails unless f is an original function index. Every function
// index read from the module passes here before it is used: wazero's
// validation does not look at all of them (not at the name section's), and
// the rewriter must not trust it to.
func (l *layout) checkFunc(f uint32) error {
	if uint64(f) >= uint64(l.importedFuncs)+uint64(len(l.funcTypes)) {
		return fmt.Errorf("function %d does not exist (the module has %d)", f, uint64(l.importedFuncs)+uint64(len(l.funcTypes)))
	}
	return nil
}

// checkType fails unless t is a type index.
func (l *layout) checkType(t uint32) error {
	if uint64(t) >= uint64(len(l.types)) {
		return fmt.Errorf("type %d does not exist (the module has %d)", t, len(l.types))
	}
	return nil
}

// newLayout reads the sections that define index spaces.
func newLayout(sections []wasmbin.Section) (*layout, error) {
	l := &layout{twinTypes: map[uint32]uint32{}, resultTypes: map[uint32]uint32{}}
	for _, s := range sections {
		var err error
		switch s.ID {
		case wasmbin.SectionType:
			err = l.readTypes(s.Payload)
		case wasmbin.SectionImport:
			err = l.readImports(s.Payload)
		case wasmbin.SectionFunction:
			err = l.readFunctions(s.Payload)
		case wasmbin.SectionGlobal:
			err = l.readGlobals(s.Payload)
		case wasmbin.SectionTag:
			err = fmt.Errorf("tag section: exception handling is not supported")
		}
		if err != nil {
			return nil, err
		}
	}
	l.safepointFunc = l.importedFuncs
	l.counterGlobal = uint32(len(l.globalTypes))
	return l, nil
}

// addTypes appends the types the rewrite needs: the safepoint's, and the
// twins' of every defined function and, with direct tables, of every
// type call_indirect uses.
func (l *layout) addTypes(indirectTypes []uint32) {
	l.safepointType = l.addType([]byte{valI32}, nil)
	for _, t := range l.funcTypes {
		l.addTwinTypes(t)
	}
	if l.directTables {
		for _, t := range indirectTypes {
			l.addTwinTypes(t)
		}
	}
}

// refFunc is where a reference to function f, which checkFunc accepted,
// points: its twin when tables are direct, else its wrapper.
func (l *layout) refFunc(f uint32) uint32 {
	if l.directTables && f >= l.importedFuncs {
		return l.twin(f)
	}
	return l.remapFunc(f)
}

// checkedRefFunc is refFunc for an index not yet checked.
func (l *layout) checkedRefFunc(f uint32) (uint32, error) {
	if err := l.checkFunc(f); err != nil {
		return 0, err
	}
	return l.refFunc(f), nil
}

func (l *layout) readGlobals(p []byte) error {
	return eachGlobal(p, func(_ uint32, valType byte, _ bool) error {
		l.globalTypes = append(l.globalTypes, valType)
		l.definedGlobals++
		return nil
	})
}

// eachGlobal reads a global section, calling fn with each global's index
// in it, value type and mutability; initializers are read past (their
// function indices are checked once the function section is read).
func eachGlobal(p []byte, fn func(i uint32, valType byte, mutable bool) error) error {
	r := wasmbin.NewReader(p)
	n, err := r.Count(minGlobalSize)
	if err != nil {
		return fmt.Errorf("global section: %w", err)
	}
	for i := range n {
		typ, err := r.Bytes(2)
		if err != nil {
			return fmt.Errorf("global %d: %w", i, err)
		}
		if _, err := wasmbin.AppendConstExpr(nil, r, func(f uint32) (uint32, error) { return f, nil }); err != nil {
			return fmt.Errorf("global %d: %w", i, err)
		}
		if err := fn(i, typ[0], typ[1] == 1); err != nil {
			return err
		}
	}
	return nil
}

// addType appends a function type and returns its index.
func (l *layout) addType(params, results []byte) uint32 {
	l.addedTypes = append(l.addedTypes, encodeType(params, results))
	return uint32(len(l.types) + len(l.addedTypes) - 1)
}

// addTwinTypes adds the types a twin of a function of type t needs: its
// own, and its body's block type if it has several results.
func (l *layout) addTwinTypes(t uint32) {
	if _, ok := l.twinTypes[t]; ok {
		return
	}
	ft := l.types[t]
	l.twinTypes[t] = l.addType(append(slices.Clip(ft.params), valI64), append(slices.Clip(ft.results), valI64))
	if len(ft.results) > 1 {
		l.resultTypes[t] = l.addType(nil, ft.results)
	}
}

func (l *layout) readTypes(p []byte) error {
	r := wasmbin.NewReader(p)
	n, err := r.Count(minTypeSize)
	if err != nil {
		return fmt.Errorf("type section: %w", err)
	}
	for i := range n {
		form, err := r.Byte()
		if err != nil {
			return fmt.Errorf("type %d: %w", i, err)
		}
		if form != 0x60 {
			return fmt.Errorf("type %d: form 0x%02x is not a function type", i, form)
		}
		var t funcType
		if t.params, err = readValTypes(r); err != nil {
			return fmt.Errorf("type %d: params: %w", i, err)
		}
		if t.results, err = readValTypes(r); err != nil {
			return fmt.Errorf("type %d: results: %w", i, err)
		}
		l.types = append(l.types, t)
	}
	return nil
}

// readValTypes reads a vector of one-byte value types.
func readValTypes(r *wasmbin.Reader) ([]byte, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	return r.Bytes(int(n))
}

func (l *layout) readImports(p []byte) error {
	return forEachImport(p, func(module, field string, kind byte, desc []byte) error {
		if module == HostModule {
			return fmt.Errorf("import %q.%q: module name %q is reserved for fuel metering", module, field, HostModule)
		}
		switch kind {
		case externFunc:
			l.importedFuncs++
		case externTable:
			l.importedTables++
		case externGlobal:
			l.globalTypes = append(l.globalTypes, desc[0])
		}
		return nil
	})
}

// forEachImport calls fn with each entry of an import section.
func forEachImport(p []byte, fn func(module, field string, kind byte, desc []byte) error) error {
	r := wasmbin.NewReader(p)
	n, err := r.Count(minImportSize)
	if err != nil {
		return fmt.Errorf("import section: %w", err)
	}
	for i := range n {
		module, err := r.Name()
		if err != nil {
			return fmt.Errorf("import %d: %w", i, err)
		}
		field, err := r.Name()
		if err != nil {
			return fmt.Errorf("import %d: %w", i, err)
		}
		kind, desc, err := readImportDesc(r)
		if err != nil {
			return fmt.Errorf("import %q.%q: %w", module, field, err)
		}
		if err := fn(module, field, kind, desc); err != nil {
			return err
		}
	}
	return nil
}

// readImportDesc reads an import's kind and the bytes describing it.
func readImportDesc(r *wasmbin.Reader) (kind byte, desc []byte, err error) {
	if kind, err = r.Byte(); err != nil {
		return 0, nil, err
	}
	start := r.Pos()
	switch kind {
	case externFunc:
		_, err = r.U32()
	case externTable:
		if _, err = r.Byte(); err == nil {
			err = skipLimits(r)
		}
	case externMemory:
		err = skipLimits(r)
	case externGlobal:
		_, err = r.Bytes(2)
	case externTag:
		err = fmt.Errorf("tag import: exception handling is not supported")
	default:
		err = fmt.Errorf("unknown import kind 0x%02x", kind)
	}
	return kind, r.Slice(start, r.Pos()), err
}

func skipLimits(r *wasmbin.Reader) error {
	flags, err := r.Byte()
	if err != nil {
		return err
	}
	if flags&^0x03 != 0 {
		return fmt.Errorf("limits flags 0x%02x: only 32-bit memories and tables are supported", flags)
	}
	if _, err := r.U32(); err != nil {
		return err
	}
	if flags&1 != 0 {
		_, err = r.U32()
	}
	return err
}

func (l *layout) readFunctions(p []byte) error {
	r := wasmbin.NewReader(p)
	n, err := r.Count(1)
	if err != nil {
		return fmt.Errorf("function section: %w", err)
	}
	for i := range n {
		t, err := r.U32()
		if err != nil {
			return fmt.Errorf("function %d: %w", i, err)
		}
		if err := l.checkType(t); err != nil {
			return fmt.Errorf("function %d: %w", i, err)
		}
		l.funcTypes = append(l.funcTypes, t)
	}
	return nil
}

// importedGlobals is how many globals are imported: the first ones.
func (l *layout) importedGlobals() int {
	return len(l.globalTypes) - l.definedGlobals
}

// blockParams is the number of parameters of a block type.
func (l *layout) blockParams(blockType int64) uint32 {
	if blockType < 0 {
		return 0
	}
	return uint32(len(l.types[blockType].params))
}
