package meter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// Names the snapshot form of a module exports for its host, beside
// FuelExport. A module that already exports a name with the prefix
// SnapshotPrefix cannot be put in that form.
const (
	SnapshotPrefix = "__aip_snapshot_"
	// SnapshotInitExport is a function, () -> (), that does what
	// instantiating the original module did before any export could run:
	// it writes the module's data into memory and runs its start function.
	// Writing the data costs no fuel, as it costs none when wazero writes
	// it; the start function is metered as any export.
	SnapshotInitExport = SnapshotPrefix + "init"
	// SnapshotGlobalPrefix, followed by 0, 1, 2 and so on, names the
	// mutable globals of the original module in index order, so that the
	// host can read them after initialization and set them in each
	// instance started from the snapshot: it finds them all by counting up
	// until a name is not exported. The fuel counter is left out: a Meter
	// sets it.
	SnapshotGlobalPrefix = SnapshotPrefix + "global_"
)

// ErrNotSnapshottable is wrapped by the error of InstrumentSnapshot for a
// module whose state after initialization a snapshot of its memory and
// mutable globals could not carry.
var ErrNotSnapshottable = errors.New("cannot be started from a snapshot")

// InstrumentSnapshot instruments wasm as Instrument does and puts the
// result in the snapshot form: instantiating it writes no memory and runs
// nothing, so an instance can start from a snapshot of another's memory
// and globals without redoing, or dirtying pages with, what the snapshot
// already holds. The data becomes a few passive segments, which the
// exported function SnapshotInitExport writes before it runs the start
// function (no longer a start section), and the mutable globals are
// exported (SnapshotGlobalPrefix). Everything else, the metered code and
// its fuel counts included, is as Instrument makes it.
//
// A plain start of the form is: instantiate, call SnapshotInitExport,
// then the module's own initializer (a WASI reactor's _initialize). A
// snapshot of memory and of the exported globals taken then, set into a
// new instance of the same compiled module, starts that instance in the
// same state.
//
// A module is refused, with an error wrapping ErrNotSnapshottable, when
// such a snapshot could not carry its whole state: it imports a memory,
// table or global; it has no memory or more than one; it has passive data
// segments, or one whose offset is not a constant; it has a mutable
// global of reference type; it changes a table at run time (table.set,
// table.grow, table.fill, table.copy, table.init, elem.drop), which a
// snapshot of memory would lose; or it exports a name the form uses. The
// form depends only on wasm, opts and CostModelVersion, which changes
// whenever the form does.
func InstrumentSnapshot(ctx context.Context, wasm []byte, opts Options) (out []byte, err error) {
	if out, err = Instrument(ctx, wasm, opts); err != nil {
		return nil, err
	}
	defer recoverInternal(&err)
	if out, err = snapshotForm(out); err != nil {
		return nil, fmt.Errorf("instrument: %w: %w", ErrNotSnapshottable, err)
	}
	return out, nil
}

// snapshotModule is what the snapshot form needs to know of an
// instrumented module.
type snapshotModule struct {
	types         []funcType
	importedFuncs uint32
	definedFuncs  uint32
	globals       []snapshotGlobal // defined globals, in index order
	counter       uint32           // the global FuelExport names
	start         *uint32
	memories      int
	segments      []dataSegment
}

type snapshotGlobal struct {
	valType byte
	mutable bool
}

// dataSegment is an active data segment, or a run of them merged.
type dataSegment struct {
	offset uint64
	bytes  []byte
	order  int // position in the data section, for overlaps
}

// snapshotForm rewrites an instrumented module into the snapshot form.
func snapshotForm(wasm []byte) ([]byte, error) {
	sections, err := wasmbin.ReadSections(wasm)
	if err != nil {
		return nil, err
	}
	m := &snapshotModule{}
	for _, s := range sections {
		if err := m.read(s); err != nil {
			return nil, err
		}
	}
	if m.memories != 1 {
		return nil, fmt.Errorf("the module defines %d memories: a snapshot needs exactly one", m.memories)
	}
	segments, err := mergeSegments(m.segments)
	if err != nil {
		return nil, err
	}
	direct, err := planDirectCalls(m, sections)
	if err != nil {
		return nil, err
	}
	initType, addedTypes := m.voidType()
	initFunc := m.importedFuncs + m.definedFuncs
	funcs := [][]byte{wasmbin.AppendU32(nil, initType)}
	code := [][]byte{initBody(segments, m.start)}
	if direct != nil {
		types, added := direct.assign(initFunc+1, uint32(len(m.types)+len(addedTypes)), m.types)
		addedTypes = append(addedTypes, added...)
		for _, t := range types {
			funcs = append(funcs, wasmbin.AppendU32(nil, t))
		}
		code = append(code, direct.dispatchers(m.types)...)
	}
	ids := []byte{wasmbin.SectionType, wasmbin.SectionFunction, wasmbin.SectionExport, wasmbin.SectionCode}
	if len(segments) > 0 {
		ids = append(ids, wasmbin.SectionDataCount, wasmbin.SectionData)
	}
	out := wasmbin.AppendModuleHeader(make([]byte, 0, len(wasm)+len(wasm)/8))
	for _, s := range withSections(sections, ids...) {
		var p []byte
		switch s.ID {
		case wasmbin.SectionType:
			p, err = appendToVector(s.Payload, addedTypes...)
		case wasmbin.SectionFunction:
			p, err = appendToVector(s.Payload, funcs...)
		case wasmbin.SectionTable:
			if p = s.Payload; direct != nil {
				p = emptyTable()
			}
		case wasmbin.SectionExport:
			p, err = appendToVector(s.Payload, m.exports(initFunc)...)
		case wasmbin.SectionStart:
			continue // SnapshotInitExport calls it
		case wasmbin.SectionElement:
			if direct != nil {
				continue // the dispatchers hold the table's entries
			}
			p = s.Payload
		case wasmbin.SectionCode:
			if direct != nil {
				p, err = direct.rewriteCode(s.Payload, int(m.definedFuncs), code...)
			} else {
				p, err = appendToVector(s.Payload, code...)
			}
		case wasmbin.SectionDataCount:
			p = wasmbin.AppendU32(nil, uint32(len(segments)))
		case wasmbin.SectionData:
			p = passiveSegments(segments)
		default:
			p = s.Payload
		}
		if err != nil {
			return nil, err
		}
		out = wasmbin.AppendSection(out, wasmbin.Section{ID: s.ID, Name: s.Name, Payload: p})
	}
	return out, nil
}

// read learns what the snapshot form needs from one section, and refuses
// what a snapshot could not carry.
func (m *snapshotModule) read(s wasmbin.Section) error {
	switch s.ID {
	case wasmbin.SectionType:
		l := &layout{}
		if err := l.readTypes(s.Payload); err != nil {
			return err
		}
		m.types = l.types
	case wasmbin.SectionImport:
		return m.readImports(s.Payload)
	case wasmbin.SectionFunction:
		n, err := wasmbin.NewReader(s.Payload).Count(1)
		m.definedFuncs = n
		return err
	case wasmbin.SectionMemory:
		n, err := wasmbin.NewReader(s.Payload).Count(2)
		m.memories += int(n)
		return err
	case wasmbin.SectionGlobal:
		return m.readGlobals(s.Payload)
	case wasmbin.SectionExport:
		return m.readExports(s.Payload)
	case wasmbin.SectionStart:
		f, err := wasmbin.NewReader(s.Payload).U32()
		m.start = &f
		return err
	case wasmbin.SectionCode:
		return m.checkTablesUnchanged(s.Payload)
	case wasmbin.SectionData:
		return m.readData(s.Payload)
	}
	return nil
}

func (m *snapshotModule) readImports(p []byte) error {
	return forEachImport(p, func(module, field string, kind byte, _ []byte) error {
		if kind != externFunc {
			return fmt.Errorf("import %q.%q: it imports a %s, whose state a snapshot of the module would not hold", module, field, externName(kind))
		}
		m.importedFuncs++
		return nil
	})
}

func externName(kind byte) string {
	switch kind {
	case externTable:
		return "table"
	case externMemory:
		return "memory"
	case externGlobal:
		return "global"
	}
	return "kind " + strconv.Itoa(int(kind))
}

func (m *snapshotModule) readGlobals(p []byte) error {
	return eachGlobal(p, func(i uint32, valType byte, mutable bool) error {
		g := snapshotGlobal{valType: valType, mutable: mutable}
		if g.mutable && (g.valType == refFunc || g.valType == refExtern) {
			return fmt.Errorf("global %d: a mutable reference, which the host cannot carry from one instance to another", i)
		}
		m.globals = append(m.globals, g)
		return nil
	})
}

func (m *snapshotModule) readExports(p []byte) error {
	exports, err := readExports(p)
	if err != nil {
		return err
	}
	for _, e := range exports {
		if strings.HasPrefix(e.name, SnapshotPrefix) {
			return fmt.Errorf("export %q: names starting %q are reserved for the snapshot form", e.name, SnapshotPrefix)
		}
		if e.name == FuelExport {
			m.counter = e.index
		}
	}
	return nil
}

// tableChanges are the instructions that change a table, or drop an
// element segment, at run time.
var tableChanges = map[wasmbin.Opcode]string{
	wasmbin.OpTableSet: "table.set", wasmbin.OpTableGrow: "table.grow", wasmbin.OpTableFill: "table.fill",
	wasmbin.OpTableCopy: "table.copy", wasmbin.OpTableInit: "table.init", wasmbin.Prefixed(0xfc, 13): "elem.drop",
}

// checkTablesUnchanged refuses code that changes a table: tables are made
// anew, from the element segments, in every instance.
func (m *snapshotModule) checkTablesUnchanged(p []byte) error {
	var in wasmbin.Instr
	return forEachBody(p, int(m.definedFuncs), func(i int, body []byte) error {
		r := wasmbin.NewReader(body)
		if _, err := readLocals(r); err != nil {
			return fmt.Errorf("code entry %d: %w", i, err)
		}
		for r.Len() > 0 {
			if err := r.ReadInstr(&in); err != nil {
				return fmt.Errorf("code entry %d: %w", i, err)
			}
			if name, ok := tableChanges[in.Op]; ok {
				return fmt.Errorf("function %d: %s changes a table, which a snapshot of memory would not hold", m.originalFunc(i), name)
			}
		}
		return nil
	})
}

// originalFunc is the index, in the module before instrumenting, of the
// function whose body is code entry i of the instrumented module: the
// wrappers come first and hold no table instruction, then the twins in
// the original order, and one import was added (module.go's layout).
func (m *snapshotModule) originalFunc(i int) uint32 {
	return m.importedFuncs - 1 + uint32(i) - m.definedFuncs/2
}

// readData reads the active data segments; a passive one is refused,
// since whether initialization dropped it is not in memory.
func (m *snapshotModule) readData(p []byte) error {
	r := wasmbin.NewReader(p)
	n, err := r.Count(2)
	if err != nil {
		return fmt.Errorf("data section: %w", err)
	}
	for i := range n {
		flags, err := r.U32()
		if err != nil {
			return fmt.Errorf("data segment %d: %w", i, err)
		}
		switch flags {
		case 0:
		case 2:
			if mem, err := r.U32(); err != nil || mem != 0 {
				return fmt.Errorf("data segment %d: memory %d: %w", i, mem, err)
			}
		default:
			return fmt.Errorf("data segment %d: passive: whether initialization dropped it is not in the snapshot", i)
		}
		offset, err := constOffset(r)
		if err != nil {
			return fmt.Errorf("data segment %d: %w", i, err)
		}
		size, err := r.U32()
		if err != nil {
			return fmt.Errorf("data segment %d: %w", i, err)
		}
		b, err := r.Bytes(int(size))
		if err != nil {
			return fmt.Errorf("data segment %d: %w", i, err)
		}
		m.segments = append(m.segments, dataSegment{offset: uint64(offset), bytes: b, order: int(i)})
	}
	return nil
}

// constOffset reads an offset expression that must be an i32.const.
func constOffset(r *wasmbin.Reader) (uint32, error) {
	var in wasmbin.Instr
	if err := r.ReadInstr(&in); err != nil {
		return 0, err
	}
	offset := in.Index
	if in.Op != wasmbin.OpI32Const {
		return 0, fmt.Errorf("offset is not a constant (opcode %s)", in.Op)
	}
	if err := r.ReadInstr(&in); err != nil || in.Op != wasmbin.OpEnd {
		return 0, fmt.Errorf("offset is not a single constant: %w", err)
	}
	return offset, nil
}

// mergedFill bounds the zeros mergeSegments may add between segments,
// beyond the segments' own bytes.
const (
	mergeGap  = 4096    // at most this many zeros between two segments merged
	mergeFill = 1 << 16 // and at most this many in all, or as many as the data holds
)

// mergeSegments merges neighbouring segments, the zeros between them
// included, into a few larger ones: each passive segment costs every
// instance an entry, and Go writes tens of thousands of small ones.
// Memory is zero before initialization, so writing zeros between
// segments changes nothing; overlapping segments are written in their
// original order, so the later one wins, as at instantiation.
func mergeSegments(segs []dataSegment) ([]dataSegment, error) {
	segs = slices.Clone(segs)
	slices.SortStableFunc(segs, func(a, b dataSegment) int { return cmp.Compare(a.offset, b.offset) })
	var total uint64
	for _, s := range segs {
		if s.offset+uint64(len(s.bytes)) > 1<<32 {
			return nil, fmt.Errorf("data segment %d: it ends past 4 GiB", s.order)
		}
		total += uint64(len(s.bytes))
	}
	budget := max(total, mergeFill)
	var out []dataSegment
	for i := 0; i < len(segs); {
		j, end := i+1, segs[i].offset+uint64(len(segs[i].bytes))
		for ; j < len(segs); j++ {
			gap := int64(segs[j].offset) - int64(end)
			if gap > mergeGap || (gap > 0 && uint64(gap) > budget) {
				break
			}
			budget -= uint64(max(gap, 0))
			end = max(end, segs[j].offset+uint64(len(segs[j].bytes)))
		}
		out = append(out, merge(segs[i:j], end))
		i = j
	}
	return slices.DeleteFunc(out, func(s dataSegment) bool { return len(s.bytes) == 0 }), nil
}

// merge writes segs, which lie within [segs[0].offset, end), into one
// segment, in their original order.
func merge(segs []dataSegment, end uint64) dataSegment {
	if len(segs) == 1 {
		return segs[0]
	}
	start := segs[0].offset
	b := make([]byte, end-start)
	slices.SortFunc(segs, func(a, b dataSegment) int { return cmp.Compare(a.order, b.order) })
	for _, s := range segs {
		copy(b[s.offset-start:], s.bytes)
	}
	return dataSegment{offset: start, bytes: b}
}

// voidType is the index of the type () -> () and, if the module has no
// such type, its encoding to append.
func (m *snapshotModule) voidType() (uint32, [][]byte) {
	for i, t := range m.types {
		if len(t.params) == 0 && len(t.results) == 0 {
			return uint32(i), nil
		}
	}
	return uint32(len(m.types)), [][]byte{{0x60, 0, 0}}
}

// exports are the exports the form adds: the init function and the
// mutable globals.
func (m *snapshotModule) exports(initFunc uint32) [][]byte {
	out := [][]byte{wasmbin.AppendU32(append(wasmbin.AppendName(nil, SnapshotInitExport), externFunc), initFunc)}
	for i, g := range m.globals {
		if !g.mutable || uint32(i) == m.counter {
			continue
		}
		e := append(wasmbin.AppendName(nil, SnapshotGlobalPrefix+strconv.Itoa(len(out)-1)), externGlobal)
		out = append(out, wasmbin.AppendU32(e, uint32(i)))
	}
	return out
}

// initBody is the code entry of SnapshotInitExport: each segment written
// and dropped, then the start function called.
func initBody(segs []dataSegment, start *uint32) []byte {
	body := []byte{0} // no locals
	for k, s := range segs {
		body = append(body, byte(wasmbin.OpI32Const))
		body = wasmbin.AppendS64(body, int64(int32(uint32(s.offset))))
		body = append(body, byte(wasmbin.OpI32Const), 0, byte(wasmbin.OpI32Const))
		body = wasmbin.AppendS64(body, int64(int32(uint32(len(s.bytes)))))
		body = append(body, 0xfc, 8)
		body = append(wasmbin.AppendU32(body, uint32(k)), 0)
		body = append(body, 0xfc, 9)
		body = wasmbin.AppendU32(body, uint32(k))
	}
	if start != nil {
		body = appendOp(body, wasmbin.OpCall, *start)
	}
	body = append(body, byte(wasmbin.OpEnd))
	return append(wasmbin.AppendU32(nil, uint32(len(body))), body...)
}

// passiveSegments encodes the data section of the form.
func passiveSegments(segs []dataSegment) []byte {
	out := wasmbin.AppendU32(nil, uint32(len(segs)))
	for _, s := range segs {
		out = wasmbin.AppendU32(append(out, 1), uint32(len(s.bytes)))
		out = append(out, s.bytes...)
	}
	return out
}
