package section

import "fmt"

// Limits on locals and signatures. A function's local declarations are
// groups of a count and a type, so a few bytes can declare 2^32 locals,
// and a decoder that makes room for each one (wazero's does) runs out of
// memory. Parameters are locals too, declared once in a type that any
// number of functions may share, so what a rewriter emits per parameter
// of each function (the meter's wrappers do) grows with the product.
const (
	// MaxFunctionLocals is the most locals a function may have, its
	// parameters included: the limit the web's engines apply, which every
	// toolchain stays within.
	MaxFunctionLocals = 50_000
	// MaxModuleLocals is the most locals, parameters included, the
	// functions of a module may have together. A Go program of 2,400
	// functions has about 10,000.
	MaxModuleLocals = 1_000_000
	// MaxParams and MaxResults bound a function type, as the web's
	// engines do.
	MaxParams  = 1_000
	MaxResults = 1_000
)

// Section ids CheckBounds walks, besides those named in section.go.
const (
	idType      byte = 1
	idFunction  byte = 3
	idTable     byte = 4
	idGlobal    byte = 6
	idStart     byte = 8
	idElement   byte = 9
	idCode      byte = 10
	idData      byte = 11
	idDataCount byte = 12
)

var sectionNames = map[byte]string{
	idType: "type", IDImport: "import", idFunction: "function", idTable: "table",
	IDMemory: "memory", idGlobal: "global", IDExport: "export", idStart: "start",
	idElement: "element", idCode: "code", idData: "data", idDataCount: "data count",
}

// CheckBounds returns an error, naming the section, unless every count and
// length in wasm fits in the bytes that are left for it, its function
// types stay within MaxParams and MaxResults, and its functions have no
// more than MaxFunctionLocals locals each, parameters included, and
// MaxModuleLocals together.
//
// It is the check to make before a decoder that sizes allocations from
// the counts it reads, as wazero's does: a count of 2^32 entries in a
// module of 14 bytes is then refused here, rather than exhausting memory
// there. Every entry takes at least one byte, so what a decoder allocates
// for a module that passes grows with the module's size.
//
// It walks every section wazero decodes, in the encodings of WebAssembly
// 2.0 with SIMD and the threads proposal's shared memories, and refuses
// what it cannot walk (typed references, exception handling, memory64,
// extended constant expressions) rather than guess where its counts are.
// It checks nothing else: a module that passes need not be valid.
func CheckBounds(wasm []byte) error {
	secs, err := Parse(wasm)
	if err != nil {
		return err
	}
	var m moduleLocals
	for _, s := range secs {
		if err := checkSection(s, &m); err != nil {
			return err
		}
	}
	return nil
}

// moduleLocals is what CheckBounds needs to count a function's locals:
// the parameters of each type, and the type of each defined function.
type moduleLocals struct {
	typeParams []uint32
	funcTypes  []uint32
	code       int    // code entries read so far
	total      uint64 // locals of those functions, parameters included
}

// params is the parameter count of the i-th defined function, or 0 when
// the module does not say (wazero refuses such a module).
func (m *moduleLocals) params(i int) uint64 {
	if i >= len(m.funcTypes) || int(m.funcTypes[i]) >= len(m.typeParams) {
		return 0
	}
	return uint64(m.typeParams[m.funcTypes[i]])
}

func checkSection(s Section, m *moduleLocals) error {
	r := &reader{b: s.Payload}
	name := sectionNames[s.ID] + " section"
	switch s.ID {
	case IDCustom:
		if s.Name != "name" {
			return nil // its bytes are copied or skipped, never decoded
		}
		name = "name section"
		r.nameSection()
	case idType:
		r.vec("type", 3, func() { m.typeParams = append(m.typeParams, r.funcType()) })
	case IDImport:
		r.vec("import", 4, r.importEntry)
	case idFunction:
		r.vec("function", 1, func() { m.funcTypes = append(m.funcTypes, r.u32()) })
	case idTable:
		r.vec("table", 3, r.tableType)
	case IDMemory:
		r.vec("memory", 2, r.limitsType)
	case idGlobal:
		r.vec("global", 3, func() { r.globalType(); r.constExpr() })
	case IDExport:
		r.vec("export", 3, func() { r.name(); r.byte(); r.u32() })
	case idStart, idDataCount:
		r.u32()
	case idElement:
		r.vec("segment", 3, r.elementSegment)
	case idCode:
		r.vec("function", 2, func() { r.codeEntry(m) })
	case idData:
		r.vec("segment", 2, r.dataSegment)
	default:
		return nil // wazero refuses the section before decoding it
	}
	if r.err == nil && len(r.b) > 0 {
		r.fail(fmt.Errorf("%d bytes after the last entry", len(r.b)))
	}
	if r.err != nil {
		return fmt.Errorf("%s: %w", name, r.err)
	}
	return nil
}

// vec reads a vector whose entries take at least minSize bytes each,
// calling entry for each one; what names them in errors.
func (r *reader) vec(what string, minSize int, entry func()) {
	n := r.count(what, minSize)
	for i := uint32(0); i < n && r.err == nil; i++ {
		entry()
		if r.err != nil {
			r.err = fmt.Errorf("%s %d: %w", what, i, r.err)
		}
	}
}

// count reads the length of a vector of what, whose entries take at least
// minSize bytes each, and fails unless they fit in what is left.
func (r *reader) count(what string, minSize int) uint32 {
	n := r.u32()
	if r.err == nil && uint64(n)*uint64(minSize) > uint64(len(r.b)) {
		r.fail(fmt.Errorf("%s count %d does not fit in the %d bytes left", what, n, len(r.b)))
		return 0
	}
	return n
}

// u32 reads an unsigned LEB128 value of at most 32 bits, in at most five
// bytes, as wazero does.
func (r *reader) u32() uint32 {
	v := r.leb(5)
	if v > 1<<32-1 {
		r.fail(fmt.Errorf("LEB128 integer %d overflows 32 bits", v))
		return 0
	}
	return uint32(v)
}

// leb reads a LEB128 value of at most maxBytes bytes, signed or not: the
// two end at the same byte.
func (r *reader) leb(maxBytes int) uint64 {
	var v uint64
	for i := 0; i < maxBytes; i++ {
		b := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b&0x80 == 0 {
			return v
		}
	}
	r.fail(fmt.Errorf("LEB128 integer longer than %d bytes", maxBytes))
	return 0
}

// skip passes over n bytes.
func (r *reader) skip(n uint32) []byte {
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.fail(fmt.Errorf("%d bytes do not fit in the %d bytes left", n, len(r.b)))
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

// sub returns a reader of the n bytes that come next, which it skips.
func (r *reader) sub(n uint32) *reader {
	b := r.skip(n)
	return &reader{b: b, err: r.err}
}

// end fails unless sub, read from r, was read to its end, and passes its
// error on to r.
func (r *reader) end(sub *reader) {
	if sub.err == nil && len(sub.b) > 0 {
		sub.fail(fmt.Errorf("%d bytes after its end", len(sub.b)))
	}
	r.fail(sub.err)
}

func (r *reader) valType() {
	switch t := r.byte(); t {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f: // i32 i64 f32 f64 v128 funcref externref
	default:
		r.fail(fmt.Errorf("value type 0x%02x is not supported", t))
	}
}

func (r *reader) refType() {
	switch t := r.byte(); t {
	case 0x70, 0x6f:
	default:
		r.fail(fmt.Errorf("reference type 0x%02x is not supported", t))
	}
}

// funcType reads a function type and returns its parameter count.
func (r *reader) funcType() uint32 {
	if form := r.byte(); r.err == nil && form != 0x60 {
		r.fail(fmt.Errorf("form 0x%02x is not a function type", form))
		return 0
	}
	params := r.signature("param", MaxParams)
	r.signature("result", MaxResults)
	return params
}

// signature reads the value types of a function type's params or results,
// at most limit of them, and returns how many there are.
func (r *reader) signature(what string, limit uint32) uint32 {
	var n uint32
	r.vec(what, 1, func() { n++; r.valType() })
	if r.err == nil && n > limit {
		r.fail(fmt.Errorf("%d %ss, more than %d", n, what, limit))
	}
	return n
}

func (r *reader) importEntry() {
	r.name()
	r.name()
	switch kind := r.byte(); kind {
	case 0x00:
		r.u32()
	case 0x01:
		r.tableType()
	case 0x02:
		r.limitsType()
	case 0x03:
		r.globalType()
	default:
		r.fail(fmt.Errorf("import kind 0x%02x is not supported", kind))
	}
}

func (r *reader) tableType() {
	r.refType()
	r.limitsType()
}

// limitsType reads the limits of a table or memory; flags 2 and 3 mark a
// shared memory.
func (r *reader) limitsType() {
	flags := r.byte()
	if flags > 3 {
		r.fail(fmt.Errorf("limits flags 0x%02x are not supported", flags))
		return
	}
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

func (r *reader) globalType() {
	r.valType()
	r.byte() // mutability
}

// constExpr reads a constant expression up to its end.
func (r *reader) constExpr() {
	for r.err == nil {
		switch op := r.byte(); op {
		case 0x0b: // end
			return
		case 0x41: // i32.const
			r.leb(5)
		case 0x42: // i64.const
			r.leb(10)
		case 0x43: // f32.const
			r.skip(4)
		case 0x44: // f64.const
			r.skip(8)
		case 0x23, 0xd2: // global.get, ref.func
			r.u32()
		case 0xd0: // ref.null
			r.refType()
		case 0xfd: // v128.const, whose sub-opcode wazero reads as one byte
			if sub := r.byte(); sub != 12 {
				r.fail(fmt.Errorf("instruction 0xfd %d is not constant", sub))
			}
			r.skip(16)
		default:
			r.fail(fmt.Errorf("instruction 0x%02x in a constant expression is not supported", op))
		}
	}
}

// elementSegment reads a segment in any of its eight encodings: flag bit
// 0 passive or declarative, bit 1 an explicit table (or, with bit 0,
// declarative), bit 2 expressions rather than function indices.
func (r *reader) elementSegment() {
	flags := r.u32()
	if flags > 7 {
		r.fail(fmt.Errorf("flags %d are not supported", flags))
		return
	}
	active := flags&1 == 0
	if active && flags&2 != 0 {
		r.u32() // table
	}
	if active {
		r.constExpr()
	}
	exprs := flags&4 != 0
	switch {
	case flags&3 == 0: // the kind is implied
	case exprs:
		r.refType()
	default:
		r.byte() // element kind
	}
	if exprs {
		r.vec("item", 1, r.constExpr)
	} else {
		r.vec("item", 1, func() { r.u32() })
	}
}

// codeEntry reads a function body's size and local declarations, and
// counts its locals, parameters included, into m. The instructions are
// not walked: they are read from within the body's bytes.
func (r *reader) codeEntry(m *moduleLocals) {
	body := r.sub(r.u32())
	locals := m.params(m.code)
	m.code++
	body.vec("local group", 2, func() {
		locals += uint64(body.u32())
		body.valType()
	})
	switch {
	case body.err != nil:
	case locals > MaxFunctionLocals:
		body.fail(fmt.Errorf("%d locals with the parameters, more than %d", locals, MaxFunctionLocals))
	case m.total+locals > MaxModuleLocals:
		body.fail(fmt.Errorf("functions so far have %d locals together with their parameters, more than %d", m.total+locals, MaxModuleLocals))
	}
	m.total += locals
	r.fail(body.err)
}

// dataSegment reads a segment: active (flags 0, or 2 with a memory index)
// or passive (flags 1).
func (r *reader) dataSegment() {
	switch flags := r.u32(); flags {
	case 0:
		r.constExpr()
	case 1:
	case 2:
		r.u32() // memory
		r.constExpr()
	default:
		r.fail(fmt.Errorf("flags %d are not supported", flags))
		return
	}
	r.skip(r.u32())
}

// nameSection reads the subsections of the name section. wazero decodes
// the module's, the functions' and the locals' names without regard to
// the subsection's size, so each of them must end where its size says.
func (r *reader) nameSection() {
	for r.err == nil && len(r.b) > 0 {
		id := r.byte()
		sub := r.sub(r.u32())
		switch id {
		case 0:
			sub.name()
		case 1:
			sub.nameMap()
		case 2:
			sub.vec("entry", 2, func() { sub.u32(); sub.nameMap() })
		default:
			sub.b = nil
		}
		r.end(sub)
		if r.err != nil {
			r.err = fmt.Errorf("%s: %w", nameSubsection(id), r.err)
		}
	}
}

// nameSubsection names a subsection of the name section in errors.
func nameSubsection(id byte) string {
	switch id {
	case 0:
		return "module name"
	case 1:
		return "function names"
	case 2:
		return "local names"
	}
	return fmt.Sprintf("subsection %d", id)
}

func (r *reader) nameMap() {
	r.vec("entry", 2, func() { r.u32(); r.name() })
}
