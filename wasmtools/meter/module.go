package meter

import (
	"fmt"
	"strings"

	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// Names the instrumented module uses to talk to the host. A module that
// already uses them is rejected, so the guest cannot tamper with its own
// metering.
const (
	// HostModule is the import module Install registers.
	HostModule = "edgeaip_meter"
	// SafepointFunc is the one function the instrumented code imports from
	// HostModule: (func (param i32)), the i32 being the reason for the call.
	SafepointFunc = "safepoint"
	// FuelExport is the exported mutable i64 global holding the counter.
	FuelExport = "__fuel"
)

// Import and export kinds.
const (
	externFunc   = 0x00
	externTable  = 0x01
	externMemory = 0x02
	externGlobal = 0x03
	externTag    = 0x04
)

// layout is what the rewriter learns about the module's index spaces, and
// where the appended import, globals and type land in them.
type layout struct {
	paramCounts     []uint32 // per type
	funcTypes       []uint32 // per defined function
	importedFuncs   uint32
	importedGlobals uint32
	definedGlobals  uint32

	safepointType uint32
	safepointFunc uint32 // the appended import; defined functions move up by one
	fuelGlobal    uint32
	depthGlobal   uint32
}

// remapFunc moves a function index past the appended import.
func (l *layout) remapFunc(i uint32) uint32 {
	if i >= l.safepointFunc {
		return i + 1
	}
	return i
}

// newLayout reads the sections that define index spaces.
func newLayout(sections []wasmbin.Section) (*layout, error) {
	l := &layout{}
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
			l.definedGlobals, err = wasmbin.NewReader(s.Payload).U32()
		case wasmbin.SectionTag:
			err = fmt.Errorf("tag section: exception handling is not supported")
		}
		if err != nil {
			return nil, err
		}
	}
	l.safepointType = uint32(len(l.paramCounts))
	l.safepointFunc = l.importedFuncs
	l.fuelGlobal = l.importedGlobals + l.definedGlobals
	l.depthGlobal = l.fuelGlobal + 1
	return l, nil
}

func (l *layout) readTypes(p []byte) error {
	r := wasmbin.NewReader(p)
	n, err := r.U32()
	if err != nil {
		return fmt.Errorf("type section: %w", err)
	}
	for i := range n {
		form, err := r.Byte()
		if err != nil || form != 0x60 {
			return fmt.Errorf("type %d: not a function type (form 0x%02x): %v", i, form, err)
		}
		params, err := skipValTypes(r)
		if err != nil {
			return fmt.Errorf("type %d: params: %w", i, err)
		}
		if _, err := skipValTypes(r); err != nil {
			return fmt.Errorf("type %d: results: %w", i, err)
		}
		l.paramCounts = append(l.paramCounts, params)
	}
	return nil
}

// skipValTypes skips a vector of one-byte value types and returns its
// length. Every value type of the accepted features is one byte.
func skipValTypes(r *wasmbin.Reader) (uint32, error) {
	n, err := r.U32()
	if err != nil {
		return 0, err
	}
	_, err = r.Bytes(int(n))
	return n, err
}

func (l *layout) readImports(p []byte) error {
	r := wasmbin.NewReader(p)
	n, err := r.U32()
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
		if module == HostModule {
			return fmt.Errorf("import %q.%q: module name %q is reserved for fuel metering", module, field, HostModule)
		}
		kind, err := skipImportDesc(r)
		if err != nil {
			return fmt.Errorf("import %q.%q: %w", module, field, err)
		}
		switch kind {
		case externFunc:
			l.importedFuncs++
		case externGlobal:
			l.importedGlobals++
		}
	}
	return nil
}

func skipImportDesc(r *wasmbin.Reader) (kind byte, err error) {
	if kind, err = r.Byte(); err != nil {
		return 0, err
	}
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
	return kind, err
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
	n, err := r.U32()
	if err != nil {
		return fmt.Errorf("function section: %w", err)
	}
	for i := range n {
		t, err := r.U32()
		if err != nil {
			return fmt.Errorf("function %d: %w", i, err)
		}
		if int(t) >= len(l.paramCounts) {
			return fmt.Errorf("function %d: type %d does not exist", i, t)
		}
		l.funcTypes = append(l.funcTypes, t)
	}
	return nil
}

// rewriteSection returns s as it goes into the instrumented module; keep is
// false for sections that are dropped.
func (rw *rewriter) rewriteSection(s wasmbin.Section) (out wasmbin.Section, keep bool, err error) {
	var p []byte
	switch s.ID {
	case wasmbin.SectionCustom:
		return rw.rewriteCustom(s)
	case wasmbin.SectionType:
		p, err = appendToVector(s.Payload, []byte{0x60, 1, valI32, 0})
	case wasmbin.SectionImport:
		p, err = appendToVector(s.Payload, safepointImport(rw.l.safepointType))
	case wasmbin.SectionGlobal:
		p, err = rewriteGlobals(s.Payload, rw.l.remapFunc, fuelGlobalEntry, depthGlobalEntry)
	case wasmbin.SectionExport:
		p, err = rw.rewriteExports(s.Payload)
	case wasmbin.SectionStart:
		p, err = rw.rewriteStart(s.Payload)
	case wasmbin.SectionElement:
		p, err = rewriteElements(s.Payload, rw.l.remapFunc)
	case wasmbin.SectionCode:
		p, err = rw.rewriteCode(s.Payload)
	default:
		return s, true, nil
	}
	if err != nil {
		return s, false, err
	}
	return wasmbin.Section{ID: s.ID, Payload: p}, true, nil
}

// appendToVector adds one encoded entry to the end of a vector.
func appendToVector(vec, entry []byte) ([]byte, error) {
	r := wasmbin.NewReader(vec)
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(make([]byte, 0, len(vec)+len(entry)+5), n+1)
	out = append(out, r.Rest()...)
	return append(out, entry...), nil
}

func safepointImport(typeIndex uint32) []byte {
	b := wasmbin.AppendName(nil, HostModule)
	b = wasmbin.AppendName(b, SafepointFunc)
	b = append(b, externFunc)
	return wasmbin.AppendU32(b, typeIndex)
}

// rewriteGlobals copies the global section, passing ref.func indices in
// initializers through remap, and appends the extra encoded globals.
func rewriteGlobals(p []byte, remap func(uint32) uint32, extra ...[]byte) ([]byte, error) {
	r := wasmbin.NewReader(p)
	n, err := r.U32()
	if err != nil {
		return nil, fmt.Errorf("global section: %w", err)
	}
	out := wasmbin.AppendU32(make([]byte, 0, len(p)+16), n+uint32(len(extra)))
	for i := range n {
		typ, err := r.Bytes(2)
		if err != nil {
			return nil, fmt.Errorf("global %d: %w", i, err)
		}
		out = append(out, typ...)
		if out, err = wasmbin.AppendConstExpr(out, r, remap); err != nil {
			return nil, fmt.Errorf("global %d: %w", i, err)
		}
	}
	for _, g := range extra {
		out = append(out, g...)
	}
	return out, nil
}

// The appended globals: the counter and the depth, both mutable and
// starting at zero. A counter of zero makes the first checked function
// entry call the safepoint, which is how the host learns which instance
// its Meter meters.
var (
	fuelGlobalEntry  = []byte{valI64, 1, byte(wasmbin.OpI64Const), 0, byte(wasmbin.OpEnd)}
	depthGlobalEntry = []byte{valI32, 1, byte(wasmbin.OpI32Const), 0, byte(wasmbin.OpEnd)}
)

type export struct {
	name  string
	kind  byte
	index uint32
}

func readExports(p []byte) ([]export, error) {
	r := wasmbin.NewReader(p)
	n, err := r.U32()
	if err != nil {
		return nil, fmt.Errorf("export section: %w", err)
	}
	exports := make([]export, 0, n)
	for i := range n {
		var e export
		if e.name, err = r.Name(); err != nil {
			return nil, fmt.Errorf("export %d: %w", i, err)
		}
		if e.kind, err = r.Byte(); err != nil {
			return nil, fmt.Errorf("export %q: %w", e.name, err)
		}
		if e.index, err = r.U32(); err != nil {
			return nil, fmt.Errorf("export %q: %w", e.name, err)
		}
		exports = append(exports, e)
	}
	return exports, nil
}

func (rw *rewriter) rewriteExports(p []byte) ([]byte, error) {
	exports, err := readExports(p)
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(make([]byte, 0, len(p)+16), uint32(len(exports)+1))
	for _, e := range exports {
		if e.name == FuelExport {
			return nil, fmt.Errorf("export %q: the name is reserved for fuel metering", e.name)
		}
		if e.kind == externFunc {
			e.index = rw.l.remapFunc(e.index)
		}
		out = append(wasmbin.AppendName(out, e.name), e.kind)
		out = wasmbin.AppendU32(out, e.index)
	}
	out = append(wasmbin.AppendName(out, FuelExport), externGlobal)
	return wasmbin.AppendU32(out, rw.l.fuelGlobal), nil
}

func (rw *rewriter) rewriteStart(p []byte) ([]byte, error) {
	f, err := wasmbin.NewReader(p).U32()
	if err != nil {
		return nil, fmt.Errorf("start section: %w", err)
	}
	return wasmbin.AppendU32(nil, rw.l.remapFunc(f)), nil
}

// rewriteCustom drops DWARF and source maps, whose code offsets the
// rewrite invalidates, remaps the name section, and keeps the rest as is.
func (rw *rewriter) rewriteCustom(s wasmbin.Section) (wasmbin.Section, bool, error) {
	switch {
	case strings.HasPrefix(s.Name, ".debug_"), s.Name == "sourceMappingURL", s.Name == "external_debug_info":
		return s, false, nil
	case s.Name == "name":
		p, err := rw.rewriteNames(s.Payload)
		if err != nil {
			return s, false, fmt.Errorf("name section: %w", err)
		}
		return wasmbin.Section{Name: s.Name, Payload: p}, true, nil
	}
	return s, true, nil
}

// blockParams is the number of parameters of a block type.
func (l *layout) blockParams(blockType int64) uint32 {
	if blockType < 0 {
		return 0
	}
	return l.paramCounts[blockType]
}
