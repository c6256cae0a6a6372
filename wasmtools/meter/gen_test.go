package meter_test

import (
	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// This file is a generator of random valid modules for FuzzInstrument,
// driven by a grammar of typed expressions and statements. The fuzzer's
// bytes are the generator's choices, so mutating them changes the program
// structurally. Every program ends, and soon: functions only call
// functions after themselves, at most maxCallSites times each, and every
// loop counts down both its own counter and a module-wide iteration budget
// held in global 2.

const (
	maxCallSites = 3
	loopBudget   = 400
)

const (
	i32 = 0x7f
	i64 = 0x7e
)

// Opcodes the generator emits, named for readability.
const (
	opUnreachable  = 0x00
	opBlock        = 0x02
	opLoop         = 0x03
	opIf           = 0x04
	opElse         = 0x05
	opEnd          = 0x0b
	opBr           = 0x0c
	opBrIf         = 0x0d
	opBrTable      = 0x0e
	opReturn       = 0x0f
	opCall         = 0x10
	opCallIndirect = 0x11
	opDrop         = 0x1a
	opSelect       = 0x1b
	opLocalGet     = 0x20
	opLocalSet     = 0x21
	opLocalTee     = 0x22
	opGlobalGet    = 0x23
	opGlobalSet    = 0x24
	opI32Load      = 0x28
	opI64Load      = 0x29
	opI32Store     = 0x36
	opI64Store     = 0x37
	opMemorySize   = 0x3f
	opMemoryGrow   = 0x40
	opI32Const     = 0x41
	opI64Const     = 0x42
	opF64Const     = 0x44
	opI32Eqz       = 0x45
	opI32Ne        = 0x47
	opI32GtS       = 0x4a
	opI32LeS       = 0x4c
	opI32Or        = 0x72
	opI32And       = 0x71
	opI32Sub       = 0x6b
	opI64Add       = 0x7c
	opI64ExtendU   = 0xad
	opI32WrapI64   = 0xa7
	opPrefixFC     = 0xfc
)

// choices reads the fuzzer's bytes as a stream of decisions. When the
// bytes run out every decision is 0, which always picks the simplest
// option, so generation terminates.
type choices struct {
	data []byte
	pos  int
}

func (c *choices) pick(n int) int {
	if c.pos >= len(c.data) || n <= 1 {
		return 0
	}
	b := c.data[c.pos]
	c.pos++
	return int(b) % n
}

type sig struct{ params, results []byte }

type genFunc struct {
	typ int
	sig sig
}

// modGen builds one module.
type modGen struct {
	c     choices
	types []sig
	funcs []genFunc
	pair  int // type index of () -> (i32 i64), for multi-value blocks
}

// Signatures the generated functions take. Function 0 is "run".
var genSigs = []sig{
	{nil, []byte{i64}},
	{[]byte{i32}, []byte{i32}},
	{[]byte{i64, i32}, []byte{i64}},
	{[]byte{i32, i32}, nil},
	{nil, []byte{i32, i64}},
	{[]byte{i64}, []byte{i32, i64}},
}

func generateModule(data []byte) []byte {
	g := &modGen{c: choices{data: data}}
	g.types = append(g.types, genSigs...)
	g.pair = 4
	n := 1 + g.c.pick(6)
	for i := range n {
		t := 0
		if i > 0 {
			t = g.c.pick(len(genSigs))
		}
		g.funcs = append(g.funcs, genFunc{typ: t, sig: genSigs[t]})
	}
	var bodies [][]byte
	for i := range g.funcs {
		bodies = append(bodies, g.body(i))
	}
	return g.encode(bodies)
}

// fnGen generates one function body.
type fnGen struct {
	g       *modGen
	self    int
	sig     sig
	locals  []byte // every local's type: params, then declared
	counter uint32 // first of two loop counters, never otherwise written
	scratch uint32 // an i64 local for combining multi-value results
	labels  []byte // per open frame: 1 if a statement may branch to it
	loops   int
	calls   int // call sites so far
	code    []byte
}

func (g *modGen) body(i int) []byte {
	f := &fnGen{g: g, self: i, sig: g.funcs[i].sig}
	f.locals = append(f.locals, f.sig.params...)
	f.locals = append(f.locals, i32, i64, i32, i64) // free locals
	f.counter = uint32(len(f.locals))
	f.locals = append(f.locals, i32, i32)
	f.scratch = uint32(len(f.locals))
	f.locals = append(f.locals, i64)
	f.labels = []byte{0} // the function's own label: left by return only
	for range 1 + f.g.c.pick(6) {
		f.stmt(3)
	}
	for _, t := range f.sig.results {
		f.expr(t, 3)
	}
	f.op(opEnd)

	declared := f.locals[len(f.sig.params):]
	out := wasmbin.AppendU32(nil, uint32(len(declared)))
	for _, t := range declared {
		out = append(out, 1, t)
	}
	return append(out, f.code...)
}

func (f *fnGen) op(b ...byte) { f.code = append(f.code, b...) }

func (f *fnGen) u32(v uint32) { f.code = wasmbin.AppendU32(f.code, v) }

func (f *fnGen) i32c(v int32) {
	f.op(opI32Const)
	f.code = wasmbin.AppendS64(f.code, int64(v))
}

func (f *fnGen) i64c(v int64) {
	f.op(opI64Const)
	f.code = wasmbin.AppendS64(f.code, v)
}

// constant picks interesting values: small, boundary, and large.
func (f *fnGen) constant(t byte) {
	vals := []int64{0, 1, 2, 7, -1, 255, 1 << 31, -1 << 63, 0x7fffffff, 12345}
	v := vals[f.g.c.pick(len(vals))]
	if t == i32 {
		f.i32c(int32(v))
	} else {
		f.i64c(v)
	}
}

// localOf returns a local of type t that is not a loop counter.
func (f *fnGen) localOf(t byte) (uint32, bool) {
	var idx []uint32
	for i, lt := range f.locals {
		if lt == t && uint32(i) != f.counter && uint32(i) != f.counter+1 && uint32(i) != f.scratch {
			idx = append(idx, uint32(i))
		}
	}
	if len(idx) == 0 {
		return 0, false
	}
	return idx[f.g.c.pick(len(idx))], true
}

func globalOf(t byte) uint32 {
	if t == i32 {
		return 0
	}
	return 1
}

// address leaves an in-bounds-most-of-the-time address: a value masked to
// the first page, with an occasional 0xffff0 to trap.
func (f *fnGen) address(budget int) {
	f.expr(i32, budget-1)
	mask := int32(0xfff8)
	if f.g.c.pick(16) == 0 {
		mask = 0xffff0
	}
	f.i32c(mask)
	f.op(opI32And)
}

// callees lists the functions self may call: those after it, so that the
// call graph is acyclic and every program ends. There are none once the
// function has used its call sites.
func (f *fnGen) callees(result byte) []int {
	if f.calls >= maxCallSites {
		return nil
	}
	var out []int
	for j := f.self + 1; j < len(f.g.funcs); j++ {
		rs := f.g.funcs[j].sig.results
		if result == 0 || (len(rs) > 0 && rs[0] == result) {
			out = append(out, j)
		}
	}
	return out
}

// call calls function j directly or through the table, leaving its
// results on the stack.
func (f *fnGen) call(j, budget int) {
	f.calls++
	for _, p := range f.g.funcs[j].sig.params {
		f.expr(p, budget-1)
	}
	if f.g.c.pick(3) == 0 {
		f.i32c(int32(j))
		f.op(opCallIndirect)
		f.u32(uint32(f.g.funcs[j].typ))
		f.u32(0)
		return
	}
	f.op(opCall)
	f.u32(uint32(j))
}

// expr leaves one value of type t.
func (f *fnGen) expr(t byte, budget int) {
	if budget <= 0 {
		f.leaf(t)
		return
	}
	switch f.g.c.pick(14) {
	case 0:
		f.leaf(t)
	case 1:
		f.expr(t, budget-1)
		f.expr(t, budget-1)
		f.binop(t)
	case 2:
		f.expr(t, budget-1)
		f.unop(t)
	case 3:
		f.compare(t, budget)
	case 4:
		f.convert(t, budget)
	case 5:
		f.address(budget)
		if t == i32 {
			f.op(opI32Load, 2)
		} else {
			f.op(opI64Load, 3)
		}
		f.u32(uint32(f.g.c.pick(4) * 8))
	case 6:
		f.expr(i32, budget-1)
		f.op(opIf, t)
		f.labels = append(f.labels, 0)
		f.expr(t, budget-1)
		f.op(opElse)
		f.expr(t, budget-1)
		f.op(opEnd)
		f.labels = f.labels[:len(f.labels)-1]
	case 7:
		// block (result t) with a br_if carrying the value out early.
		f.op(opBlock, t)
		f.labels = append(f.labels, 0)
		f.expr(t, budget-1)
		f.expr(i32, budget-1)
		f.op(opBrIf, 0)
		f.labels = f.labels[:len(f.labels)-1]
		f.op(opEnd)
	case 8:
		f.callExpr(t, budget)
	case 9:
		f.expr(t, budget-1)
		f.expr(t, budget-1)
		f.expr(i32, budget-1)
		f.op(opSelect)
	case 10:
		f.expr(t, budget-1)
		if l, ok := f.localOf(t); ok {
			f.op(opLocalTee)
			f.u32(l)
		}
	case 11:
		f.multiValue(t, budget)
	case 12:
		f.op(opF64Const, 0, 0, 0, 0, 0x80, 0x84, 0x2e, 0x41) // 1e6
		if t == i32 {
			f.op(opPrefixFC, 2) // i32.trunc_sat_f64_s
		} else {
			f.op(opPrefixFC, 6) // i64.trunc_sat_f64_s
		}
	default:
		f.memoryOp(t)
	}
}

func (f *fnGen) leaf(t byte) {
	switch f.g.c.pick(3) {
	case 0:
		f.constant(t)
	case 1:
		if l, ok := f.localOf(t); ok {
			f.op(opLocalGet)
			f.u32(l)
			return
		}
		f.constant(t)
	default:
		f.op(opGlobalGet)
		f.u32(globalOf(t))
	}
}

func (f *fnGen) binop(t byte) {
	// add sub mul div_s div_u rem_s rem_u and or xor shl shr_s shr_u rotl rotr
	base := byte(0x6a)
	if t == i64 {
		base = 0x7c
	}
	f.op(base + byte(f.g.c.pick(15)))
}

func (f *fnGen) unop(t byte) {
	if t == i32 {
		// clz ctz popcnt extend8_s extend16_s
		f.op([]byte{0x67, 0x68, 0x69, 0xc0, 0xc1}[f.g.c.pick(5)])
		return
	}
	f.op([]byte{0x79, 0x7a, 0x7b, 0xc2, 0xc3, 0xc4}[f.g.c.pick(6)])
}

func (f *fnGen) compare(t byte, budget int) {
	if t == i64 {
		f.expr(i32, budget-1)
		f.op(opI64ExtendU)
		return
	}
	operand := []byte{i32, i64}[f.g.c.pick(2)]
	f.expr(operand, budget-1)
	f.expr(operand, budget-1)
	if operand == i32 {
		f.op(0x46 + byte(f.g.c.pick(10))) // eq .. ge_u
	} else {
		f.op(0x51 + byte(f.g.c.pick(10)))
	}
}

func (f *fnGen) convert(t byte, budget int) {
	if t == i64 {
		f.expr(i32, budget-1)
		f.op([]byte{0xac, 0xad}[f.g.c.pick(2)]) // extend_i32_s/u
		return
	}
	f.expr(i64, budget-1)
	f.op(opI32WrapI64)
}

func (f *fnGen) callExpr(t byte, budget int) {
	js := f.callees(t)
	if len(js) == 0 {
		f.leaf(t)
		return
	}
	j := js[f.g.c.pick(len(js))]
	f.call(j, budget)
	// Keep the first result: stash the rest in scratch or drop them.
	for range f.g.funcs[j].sig.results[1:] {
		f.op(opDrop)
	}
}

// multiValue makes a block with two results and folds them into one.
func (f *fnGen) multiValue(t byte, budget int) {
	f.op(opBlock)
	f.code = wasmbin.AppendS64(f.code, int64(f.g.pair))
	f.labels = append(f.labels, 0)
	f.expr(i32, budget-1)
	f.expr(i64, budget-1)
	f.labels = f.labels[:len(f.labels)-1]
	f.op(opEnd)
	f.op(opLocalSet)
	f.u32(f.scratch)
	f.op(opI64ExtendU, opLocalGet)
	f.u32(f.scratch)
	f.op(opI64Add)
	if t == i32 {
		f.op(opI32WrapI64)
	}
}

func (f *fnGen) memoryOp(t byte) {
	if f.g.c.pick(2) == 0 {
		f.op(opMemorySize, 0)
	} else {
		f.i32c(int32(f.g.c.pick(2)))
		f.op(opMemoryGrow, 0)
	}
	if t == i64 {
		f.op(opI64ExtendU)
	}
}

// stmt leaves the stack as it found it.
func (f *fnGen) stmt(budget int) {
	if budget <= 0 {
		f.assign(1)
		return
	}
	switch f.g.c.pick(13) {
	case 0:
		f.assign(budget)
	case 1:
		t := []byte{i32, i64}[f.g.c.pick(2)]
		f.expr(t, budget-1)
		f.op(opGlobalSet)
		f.u32(globalOf(t))
	case 2:
		f.address(budget)
		if f.g.c.pick(2) == 0 {
			f.expr(i32, budget-1)
			f.op(opI32Store, 2)
		} else {
			f.expr(i64, budget-1)
			f.op(opI64Store, 3)
		}
		f.u32(uint32(f.g.c.pick(4) * 8))
	case 3:
		f.expr(i32, budget-1)
		f.op(opIf, 0x40)
		f.nested(budget)
		if f.g.c.pick(2) == 0 {
			f.op(opElse)
			f.stmts(budget - 1)
		}
		f.labels = f.labels[:len(f.labels)-1]
		f.op(opEnd)
	case 4:
		f.op(opBlock, 0x40)
		f.nested(budget)
		f.expr(i32, budget-1)
		f.op(opBrIf, 0)
		f.stmts(budget - 1)
		f.labels = f.labels[:len(f.labels)-1]
		f.op(opEnd)
	case 5:
		f.loop(budget)
	case 6:
		f.switchStmt(budget)
	case 7:
		if js := f.callees(0); len(js) > 0 {
			j := js[f.g.c.pick(len(js))]
			f.call(j, budget)
			for range f.g.funcs[j].sig.results {
				f.op(opDrop)
			}
		}
	case 8:
		f.bulk(budget)
	case 9:
		f.expr(i32, budget-1)
		f.op(opIf, 0x40)
		f.labels = append(f.labels, 0)
		for _, t := range f.sig.results {
			f.expr(t, budget-1)
		}
		f.op(opReturn)
		f.labels = f.labels[:len(f.labels)-1]
		f.op(opEnd)
	case 10:
		f.branchOut(budget)
	case 11:
		f.expr([]byte{i32, i64}[f.g.c.pick(2)], budget-1)
		f.op(opDrop)
	default:
		f.assign(budget)
	}
}

func (f *fnGen) stmts(budget int) {
	for range 1 + f.g.c.pick(3) {
		f.stmt(budget - 1)
	}
}

// nested opens a frame that statements may branch out of and fills it.
func (f *fnGen) nested(budget int) {
	f.labels = append(f.labels, 1)
	f.stmts(budget - 1)
}

func (f *fnGen) assign(budget int) {
	t := []byte{i32, i64}[f.g.c.pick(2)]
	l, ok := f.localOf(t)
	if !ok {
		return
	}
	f.expr(t, budget-1)
	f.op(opLocalSet)
	f.u32(l)
}

// loop runs its body a bounded number of times, counting down a counter
// local that nothing else writes, and the module's iteration budget. Its
// back edge is either a br_if at the bottom or a br after an exit test at
// the top.
func (f *fnGen) loop(budget int) {
	if f.loops >= 2 {
		f.assign(budget)
		return
	}
	counter := f.counter + uint32(f.loops)
	f.i32c(int32(1 + f.g.c.pick(8)))
	f.op(opLocalSet)
	f.u32(counter)
	f.loops++
	if f.g.c.pick(2) == 0 {
		f.op(opLoop, 0x40)
		f.labels = append(f.labels, 0)
		f.stmts(budget - 1)
		f.countDown(counter)
		// continue while counter != 0 && budget > 0
		f.op(opLocalGet)
		f.u32(counter)
		f.i32c(0)
		f.op(opI32Ne, opGlobalGet, 2)
		f.i32c(0)
		f.op(opI32GtS, opI32And, opBrIf, 0)
		f.labels = f.labels[:len(f.labels)-1]
		f.op(opEnd)
	} else {
		f.op(opBlock, 0x40, opLoop, 0x40)
		f.labels = append(f.labels, 1, 0)
		// leave when counter == 0 || budget <= 0
		f.op(opLocalGet)
		f.u32(counter)
		f.op(opI32Eqz, opGlobalGet, 2)
		f.i32c(0)
		f.op(opI32LeS, opI32Or, opBrIf, 1)
		f.countDown(counter)
		f.stmts(budget - 1)
		f.op(opBr, 0)
		f.labels = f.labels[:len(f.labels)-2]
		f.op(opEnd, opEnd)
	}
	f.loops--
}

// countDown decrements a loop counter and the module's iteration budget.
func (f *fnGen) countDown(counter uint32) {
	f.op(opLocalGet)
	f.u32(counter)
	f.i32c(1)
	f.op(opI32Sub, opLocalSet)
	f.u32(counter)
	f.op(opGlobalGet, 2)
	f.i32c(1)
	f.op(opI32Sub, opGlobalSet, 2)
}

// switchStmt is a br_table over three nested blocks.
func (f *fnGen) switchStmt(budget int) {
	f.op(opBlock, 0x40, opBlock, 0x40, opBlock, 0x40)
	f.labels = append(f.labels, 1, 1, 1)
	f.expr(i32, budget-1)
	f.op(opBrTable, 2, 0, 1, 2)
	f.op(opEnd)
	f.labels = f.labels[:len(f.labels)-1]
	f.stmt(budget - 1)
	f.op(opEnd)
	f.labels = f.labels[:len(f.labels)-1]
	f.stmt(budget - 1)
	f.op(opEnd)
	f.labels = f.labels[:len(f.labels)-1]
}

// branchOut branches, unconditionally or not, to an enclosing frame that
// statements may leave, and leaves dead code behind an unconditional one.
func (f *fnGen) branchOut(budget int) {
	var targets []uint32
	for i := len(f.labels) - 1; i >= 0; i-- {
		if f.labels[i] == 1 {
			targets = append(targets, uint32(len(f.labels)-1-i))
		}
	}
	if len(targets) == 0 {
		f.assign(budget)
		return
	}
	l := targets[f.g.c.pick(len(targets))]
	if f.g.c.pick(2) == 0 {
		f.expr(i32, budget-1)
		f.op(opBrIf)
		f.u32(l)
		return
	}
	f.op(opBr)
	f.u32(l)
	f.stmt(budget - 1) // unreachable
	if f.g.c.pick(4) == 0 {
		f.op(opUnreachable)
	}
}

// bulk uses memory.fill, memory.copy or memory.init with short lengths.
func (f *fnGen) bulk(budget int) {
	f.address(budget)
	switch f.g.c.pick(3) {
	case 0:
		f.expr(i32, budget-1)
		f.i32c(int32(f.g.c.pick(4) * 300))
		f.op(opPrefixFC, 11, 0) // memory.fill
	case 1:
		f.address(budget)
		f.i32c(int32(f.g.c.pick(4) * 300))
		f.op(opPrefixFC, 10, 0, 0) // memory.copy
	default:
		f.i32c(int32(f.g.c.pick(4)))
		f.i32c(int32(f.g.c.pick(8)))
		f.op(opPrefixFC, 8, 1, 0) // memory.init of the passive segment 1
	}
}

// encode assembles the module: types, functions, a table holding every
// function at its own index, one memory, three globals (the last is the
// loop budget), "run" and "memory" exports, and an active and a passive
// data segment.
func (g *modGen) encode(bodies [][]byte) []byte {
	out := wasmbin.AppendModuleHeader(nil)
	section := func(id byte, payload []byte) {
		out = wasmbin.AppendSection(out, wasmbin.Section{ID: id, Payload: payload})
	}
	var p []byte
	p = wasmbin.AppendU32(nil, uint32(len(g.types)))
	for _, s := range g.types {
		p = append(p, 0x60)
		p = wasmbin.AppendU32(p, uint32(len(s.params)))
		p = append(p, s.params...)
		p = wasmbin.AppendU32(p, uint32(len(s.results)))
		p = append(p, s.results...)
	}
	section(wasmbin.SectionType, p)

	p = wasmbin.AppendU32(nil, uint32(len(g.funcs)))
	for _, fn := range g.funcs {
		p = wasmbin.AppendU32(p, uint32(fn.typ))
	}
	section(wasmbin.SectionFunction, p)

	section(wasmbin.SectionTable, append([]byte{1, 0x70, 0x00}, wasmbin.AppendU32(nil, uint32(len(g.funcs)))...))
	section(wasmbin.SectionMemory, []byte{1, 0x01, 1, 2})
	globals := []byte{3,
		i32, 1, opI32Const, 42, opEnd,
		i64, 1, opI64Const, 0x7f, opEnd,
		i32, 1, opI32Const}
	globals = wasmbin.AppendS64(globals, loopBudget)
	section(wasmbin.SectionGlobal, append(globals, opEnd))

	p = wasmbin.AppendU32(nil, 2)
	p = append(wasmbin.AppendName(p, "run"), 0, 0)
	p = append(wasmbin.AppendName(p, "memory"), 2, 0)
	section(wasmbin.SectionExport, p)

	p = []byte{1, 0, opI32Const, 0, opEnd}
	p = wasmbin.AppendU32(p, uint32(len(g.funcs)))
	for i := range g.funcs {
		p = wasmbin.AppendU32(p, uint32(i))
	}
	section(wasmbin.SectionElement, p)
	section(wasmbin.SectionDataCount, []byte{2})

	p = wasmbin.AppendU32(nil, uint32(len(bodies)))
	for _, b := range bodies {
		p = wasmbin.AppendU32(p, uint32(len(b)))
		p = append(p, b...)
	}
	section(wasmbin.SectionCode, p)

	p = []byte{2, 0, opI32Const, 16, opEnd, 5, 'h', 'e', 'l', 'l', 'o', 1, 8, 'p', 'a', 's', 's', 'i', 'v', 'e', '!'}
	section(wasmbin.SectionData, p)
	return out
}
