package meter

import (
	"fmt"

	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// Safepoint reasons, the argument the guest passes to the host import.
const (
	reasonFuel  = 0 // the slice is used up: account, check, refill
	reasonDepth = 1 // the call-depth limit was reached: trap
	reasonEnter = 2 // the host is calling in: bind the Meter, check, refill
)

// A segment is a run of instructions that control enters only at its start
// and leaves only at its end, so its whole cost can be paid up front with
// one subtraction. A hole marks where that payment goes; its code is only
// known once the segment's end, and so its cost, has been seen.
type holeKind uint8

const (
	holeEntry  holeKind = iota // pay, and count the depth, on entry
	holeLoad                   // load the counter from the global and pay (after call_indirect)
	holePay                    // pay
	holeHeader                 // pay at a header-checked loop's header, and leave for $slow if out of fuel
	holeUndo                   // in $slow, give back what the header paid, since it will pay again
)

type hole struct {
	at   int // offset in bodyRewriter.out
	kind holeKind
	seg  int
}

// segment is what a hole pays for, and whether it checks after paying.
//
// A segment that holds an instruction that traps on purpose or on bad
// arguments (see canTrap) also stores the counter in the global after
// paying, so that a trap, which loses the local, leaves the host the
// count: exact, since the segment is paid for whole before it runs, and
// the same on every engine. Loads and stores do not: they are in nearly
// every segment, and the store cost 2–19 % of CPU time (RATIONALE.md); a
// memory fault reports the count at the last store or safepoint.
//
// Checks are where the guest can run out of fuel and where the host gets
// control: at loop back edges (or headers), at the start of every segment
// that ends in a checked call (see funcPlan), and before a host entry
// function returns. Calls
// from the host start with a safepoint of their own, in the wrapper. Checking
// at the start of the calling segment rather than on the callee's entry
// costs less under wazero's compiler: the values live there are live
// across the call anyway, so the safepoint call adds no spills, where at
// a function's entry it made the parameters spill and reload.
type segment struct {
	cost  int64
	check bool
	store bool // store the counter after paying: an instruction in the segment can trap
	// callReturn: the segment starts where a call to a twin that counts
	// depth returns, and its payment takes that level off the depth. The
	// callee leaves the depth raised, so that counting costs its return
	// nothing: the caller folds the decrement into a payment it makes anyway.
	callReturn bool
}

type frameKind uint8

const (
	frameFunc frameKind = iota
	frameBlock
	frameLoop
	frameIf
)

// Frames the rewrite adds around a wrapped loop:
//
//	block $exit (type of the loop)   ;; the loop's normal way out
//	  loop $resume                   ;; back in after the safepoint
//	    block $slow                  ;; a back edge with no fuel left leaves to here
//	      loop $L ... end            ;; the original loop
//	      br $exit
//	    end
//	    safepoint call
//	    br $resume
//	  end
//	  unreachable
//	end
//
// Every back edge checks the counter and leaves for $slow when the slice
// is used up. This puts the safepoint call outside the loop: wazero's
// register allocator spills every value that is live across a call, even a
// call that never runs, so a call inside the loop would cost loads and
// stores on every iteration.
//
// A header-checked loop, whose first segment ends in a checked call,
// checks at its header instead, after paying for that segment, and its
// back edges do not check. $slow then gives back what the header paid
// before re-entering, which pays it again.
const wrapFrames = 3

// loopPlan is what decode decides for a loop.
type loopPlan struct {
	wrap          bool
	headerChecked bool
	counted       bool        // a counted loop, versioned (see counted.go)
	count         countedLoop // if counted
}

type frame struct {
	kind          frameKind
	targeted      bool // some branch goes to this frame's label
	wrapped       bool // a loop wrapped as above
	headerChecked bool // a wrapped loop that checks at its header
	headerSeg     int  // the segment a header-checked loop's header pays for
	versioned     bool // a counted loop: an if around its unmetered copy and the wrapped loop
	added         int  // frames the rewrite added around this frame and the ones enclosing it
}

// bodyRewriter turns one function body at a time into the body of its
// twin. It is reused across the bodies of a module to keep its buffers.
//
// The twin's body is the original one inside a block, $body, that stands
// for the function's own label, so that branches to that label and the
// end meet at one exit that returns the counter after the results:
//
//	<entry: pay, raise the depth, check it>
//	block $body (result <results>)
//	  <original body, instrumented>
//	end
//	<exit: check if a host entry>
//	local.get $counter
//
// A return returns directly, with the counter pushed in place, except in
// a host entry, which must pass the exit check. The depth is returned
// raised: the caller's next payment lowers it (segment.callReturn).
type bodyRewriter struct {
	l        *layout
	maxDepth uint32
	plans    []funcPlan // of every defined function
	plan     funcPlan   // of this one

	src       *wasmbin.Reader // the body, encoded
	instrs    []wasmbin.Instr // the body, decoded once
	at        int             // index in instrs of the instruction being emitted
	loopPlans []loopPlan      // per loop, in order of appearance
	loops     int             // loops emitted so far
	forward   map[int]bool    // back edges that need no check: see dispatch.go

	out   []byte // instructions with holes cut out
	holes []hole
	segs  []segment
	ctrl  []frame
	seg   int // the current segment, or -1 in unreachable code

	nparams   uint32 // of the original function; its locals move up by one
	counter   uint32 // the twin's extra parameter
	tmp       uint32 // a scratch i32 local for dynamic costs, followed by an i64 one for counted loops
	usesTmp   bool
	usesTmp64 bool
	bodyType  []byte // block type of $body
}

// rewrite appends the twin of a function of type t with the given body,
// its code entry, to dst.
func (b *bodyRewriter) rewrite(dst, body []byte, t uint32, plan funcPlan) ([]byte, error) {
	r := wasmbin.NewReader(body)
	locals, err := readLocals(r)
	if err != nil {
		return nil, err
	}
	b.reset(t, locals.count, plan)
	b.src = r
	if err := b.decode(r); err != nil {
		return nil, err
	}
	b.findForwardJumps()
	b.ctrl = append(b.ctrl, frame{kind: frameFunc})
	b.newSegment(holeEntry, false)
	if plan.checkDepth {
		b.appendDepthCheck()
	}
	b.out = append(b.out, byte(wasmbin.OpBlock))
	b.out = append(b.out, b.bodyType...)
	for b.at = range b.instrs {
		b.instruction(&b.instrs[b.at], r.Slice(b.instrs[b.at].Start, b.instrs[b.at].End))
	}
	return b.assemble(dst, locals), nil
}

// localDecls are a body's local declarations: groups of locals of one type.
type localDecls struct {
	groups uint32
	raw    []byte // the groups, without their count
	count  uint32 // locals declared
}

func readLocals(r *wasmbin.Reader) (localDecls, error) {
	groups, err := r.Count(2) // a count and a type each
	if err != nil {
		return localDecls{}, fmt.Errorf("locals: %w", err)
	}
	start := r.Pos()
	var total uint64
	for range groups {
		c, err := r.U32()
		if err != nil {
			return localDecls{}, fmt.Errorf("locals: %w", err)
		}
		if _, err := r.Byte(); err != nil {
			return localDecls{}, fmt.Errorf("locals: %w", err)
		}
		total += uint64(c)
	}
	// Keep the total, with the local and parameter added, inside a uint32.
	if total > 1<<31 {
		return localDecls{}, fmt.Errorf("%d locals is too many", total)
	}
	return localDecls{groups: groups, raw: r.Slice(start, r.Pos()), count: uint32(total)}, nil
}

func (b *bodyRewriter) reset(t, nlocals uint32, plan funcPlan) {
	b.plan = plan
	b.instrs, b.loopPlans, b.loops = b.instrs[:0], b.loopPlans[:0], 0
	b.out, b.holes, b.segs, b.ctrl = b.out[:0], b.holes[:0], b.segs[:0], b.ctrl[:0]
	ft := b.l.types[t]
	b.nparams = uint32(len(ft.params))
	b.counter = b.nparams
	b.tmp = b.nparams + 1 + nlocals
	b.usesTmp, b.usesTmp64 = false, false
	switch len(ft.results) {
	case 0:
		b.bodyType = append(b.bodyType[:0], blockEmpty)
	case 1:
		b.bodyType = append(b.bodyType[:0], ft.results[0])
	default:
		b.bodyType = wasmbin.AppendU32(b.bodyType[:0], b.l.resultTypes[t])
	}
}

// decode reads the instructions of the body, checks the labels and locals
// they name (scanBody has checked function and type indices), and plans
// its loops. A loop
// is wrapped unless it takes parameters, which the way back in from the
// safepoint could not supply, or is the target of a br_table, whose back
// edge could not carry a check; it then checks inline at its header. A
// loop whose first segment ends in a checked call is header-checked: it
// checks there every iteration anyway.
func (b *bodyRewriter) decode(r *wasmbin.Reader) error {
	open := []int{-1}   // per open frame: its loop number, or -1
	starts := []int{-1} // per open frame: the index of its opcode in instrs
	header := -1        // the loop whose header segment is being read, or -1
	for len(open) > 0 {
		var in wasmbin.Instr
		if err := r.ReadInstr(&in); err != nil {
			return err
		}
		if err := b.checkIndices(&in, len(open)); err != nil {
			return fmt.Errorf("body offset %d: %w", in.Start, err)
		}
		if header >= 0 && in.Op != wasmbin.OpBlock && endsSegment(in.Op) {
			b.loopPlans[header].headerChecked = b.checkedCall(&in)
			header = -1
		}
		switch in.Op {
		case wasmbin.OpBlock, wasmbin.OpIf:
			open, starts = append(open, -1), append(starts, len(b.instrs))
		case wasmbin.OpLoop:
			header = len(b.loopPlans)
			open, starts = append(open, header), append(starts, len(b.instrs))
			b.loopPlans = append(b.loopPlans, loopPlan{wrap: b.l.blockParams(in.BlockType) == 0})
		case wasmbin.OpEnd:
			top := len(open) - 1
			if loop := open[top]; loop >= 0 && b.loopPlans[loop].wrap {
				b.loopPlans[loop].count, b.loopPlans[loop].counted = b.countedLoopAt(starts[top], len(b.instrs))
			}
			open, starts = open[:top], starts[:top]
		case wasmbin.OpBrTable:
			for _, l := range in.Labels {
				if loop := open[len(open)-1-int(l)]; loop >= 0 {
					b.loopPlans[loop].wrap = false
				}
			}
		}
		b.instrs = append(b.instrs, in)
	}
	if r.Len() != 0 {
		return fmt.Errorf("%d bytes after the end of the body", r.Len())
	}
	return nil
}

// checkIndices fails if in names a label beyond the depth frames open
// around it, or a local the function does not have.
func (b *bodyRewriter) checkIndices(in *wasmbin.Instr, depth int) error {
	switch in.Op {
	case wasmbin.OpBr, wasmbin.OpBrIf:
		if uint64(in.Index) >= uint64(depth) {
			return fmt.Errorf("label %d does not exist (depth %d)", in.Index, depth)
		}
	case wasmbin.OpBrTable:
		for _, l := range in.Labels {
			if uint64(l) >= uint64(depth) {
				return fmt.Errorf("br_table: label %d does not exist (depth %d)", l, depth)
			}
		}
	case wasmbin.OpLocalGet, wasmbin.OpLocalSet, wasmbin.OpLocalTee:
		if in.Index >= b.tmp-1 {
			return fmt.Errorf("local %d does not exist (the function has %d)", in.Index, b.tmp-1)
		}
	}
	return nil
}

// endsSegment says whether op is the last instruction of its segment, or
// (for loop) starts a new one.
func endsSegment(op wasmbin.Opcode) bool {
	switch op {
	case wasmbin.OpLoop, wasmbin.OpIf, wasmbin.OpElse, wasmbin.OpEnd,
		wasmbin.OpBr, wasmbin.OpBrIf, wasmbin.OpBrTable, wasmbin.OpReturn, wasmbin.OpUnreachable,
		wasmbin.OpCall, wasmbin.OpCallIndirect:
		return true
	}
	return false
}

// checkedCall says whether in is a call the segment ending in it checks
// for: one to an import, through a table, to a function that is not
// light, or one that closes a cycle of direct calls (see funcPlan).
func (b *bodyRewriter) checkedCall(in *wasmbin.Instr) bool {
	switch in.Op {
	case wasmbin.OpCallIndirect:
		return true
	case wasmbin.OpCall:
		if in.Index < b.l.importedFuncs {
			return true
		}
		callee := in.Index - b.l.importedFuncs
		return !b.plans[callee].light || b.plan.cycleCallees[callee]
	}
	return false
}

// instruction copies one instruction to the output with the
// instrumentation it calls for. raw is its encoding.
func (b *bodyRewriter) instruction(in *wasmbin.Instr, raw []byte) {
	b.charge(staticCost(in.Op))
	if canTrap(in.Op) {
		b.storeSegment()
	}
	switch in.Op {
	case wasmbin.OpBlock:
		b.push(frame{kind: frameBlock}, raw)
	case wasmbin.OpLoop:
		b.loop(raw)
	case wasmbin.OpIf:
		b.push(frame{kind: frameIf}, raw)
		b.split(holePay, false)
	case wasmbin.OpElse:
		b.out = append(b.out, raw...)
		b.newSegment(holePay, false)
	case wasmbin.OpEnd:
		b.end(raw)
	case wasmbin.OpBr, wasmbin.OpBrIf:
		b.branch(in.Op, in.Index)
	case wasmbin.OpBrTable:
		b.branchTable(in.Labels)
	case wasmbin.OpReturn:
		if b.plan.hostEntry {
			b.branch(wasmbin.OpBr, uint32(len(b.ctrl)-1))
			break
		}
		b.out = appendOp(b.out, wasmbin.OpLocalGet, b.counter)
		b.out = append(b.out, raw...)
		b.seg = -1
	case wasmbin.OpUnreachable:
		b.out = append(b.out, raw...)
		b.seg = -1
	case wasmbin.OpCall:
		b.call(in)
	case wasmbin.OpCallIndirect:
		b.callIndirect(in, raw)
	case wasmbin.OpRefFunc:
		b.out = appendOp(b.out, wasmbin.OpRefFunc, b.l.refFunc(in.Index))
	case wasmbin.OpLocalGet, wasmbin.OpLocalSet, wasmbin.OpLocalTee:
		b.out = appendOp(b.out, in.Op, b.local(in.Index))
	default:
		b.appendDynamicCharge(in.Op)
		b.out = append(b.out, raw...)
	}
}

// canTrap says whether op can trap, loads and stores aside: unreachable,
// an access to a table, a bulk memory op, an indirect call, an integer
// division, or a float-to-int truncation that does not saturate. A call traps only if its callee does
// (or the stack overflows, which MaxCallDepth prevents).
func canTrap(op wasmbin.Opcode) bool {
	switch op {
	case wasmbin.OpUnreachable, wasmbin.OpCallIndirect, wasmbin.OpTableGet, wasmbin.OpTableSet,
		wasmbin.OpMemoryInit, wasmbin.OpMemoryCopy, wasmbin.OpMemoryFill,
		wasmbin.OpTableInit, wasmbin.OpTableCopy, wasmbin.OpTableFill:
		return true
	}
	return op >= wasmbin.OpI32DivS && op <= wasmbin.OpI32RemU ||
		op >= wasmbin.OpI64DivS && op <= wasmbin.OpI64RemU ||
		op >= wasmbin.OpI32TruncF32S && op <= wasmbin.OpI32TruncF64U ||
		op >= wasmbin.OpI64TruncF32S && op <= wasmbin.OpI64TruncF64U
}

func (b *bodyRewriter) live() bool { return b.seg >= 0 }

// local moves an original local index past the counter parameter.
func (b *bodyRewriter) local(i uint32) uint32 {
	if i >= b.nparams {
		return i + 1
	}
	return i
}

func (b *bodyRewriter) charge(cost int64) {
	if b.live() {
		b.segs[b.seg].cost += cost
	}
}

// checkSegment makes the current segment check after paying.
func (b *bodyRewriter) checkSegment() {
	if b.live() {
		b.segs[b.seg].check = true
	}
}

// storeSegment makes the current segment store the counter after paying.
func (b *bodyRewriter) storeSegment() {
	if b.live() {
		b.segs[b.seg].store = true
	}
}

// newSegment starts a segment whose payment goes at the current output
// position.
func (b *bodyRewriter) newSegment(kind holeKind, check bool) {
	b.segs = append(b.segs, segment{check: check})
	b.seg = len(b.segs) - 1
	b.holes = append(b.holes, hole{at: len(b.out), kind: kind, seg: b.seg})
}

// split ends the current segment. Unreachable code stays unreachable.
func (b *bodyRewriter) split(kind holeKind, check bool) {
	if b.live() {
		b.newSegment(kind, check)
	}
}

func (b *bodyRewriter) push(f frame, raw []byte) {
	f.added = b.ctrl[len(b.ctrl)-1].added
	if f.wrapped {
		f.added += wrapFrames
	}
	if f.versioned {
		f.added++
	}
	b.ctrl = append(b.ctrl, f)
	b.out = append(b.out, raw...)
}

// loop opens a loop, wrapped or not. The header of a wrapped loop only
// pays, unless the loop is header-checked; otherwise its back edges
// check. A loop that is not wrapped checks inline at its header.
func (b *bodyRewriter) loop(raw []byte) {
	plan := b.loopPlans[b.loops]
	b.loops++
	if !plan.wrap {
		b.push(frame{kind: frameLoop}, raw)
		b.split(holePay, true)
		return
	}
	f := frame{kind: frameLoop, wrapped: true, headerChecked: plan.headerChecked, headerSeg: -1}
	if plan.counted && b.live() {
		b.appendCountedEntry(&plan.count)
		f.versioned = true
	}
	// $exit takes the loop's block type, which follows its opcode.
	b.out = append(b.out, byte(wasmbin.OpBlock))
	b.out = append(b.out, raw[1:]...)
	b.out = append(b.out, byte(wasmbin.OpLoop), blockEmpty, byte(wasmbin.OpBlock), blockEmpty)
	b.push(f, raw)
	if plan.headerChecked {
		b.split(holeHeader, false)
		b.ctrl[len(b.ctrl)-1].headerSeg = b.seg
	} else {
		b.split(holePay, false)
	}
}

// end closes a frame. Control arrives after the end of an if from two
// places, and after a block from every branch to it, so a new segment
// starts there. After a loop, or a block nothing branches to, control only
// falls through, and the current segment goes on.
func (b *bodyRewriter) end(raw []byte) {
	f := b.ctrl[len(b.ctrl)-1]
	b.ctrl = b.ctrl[:len(b.ctrl)-1]
	if f.kind == frameFunc {
		b.out = append(b.out, byte(wasmbin.OpEnd)) // $body
		b.appendExit()
		b.out = append(b.out, raw...)
		return
	}
	b.out = append(b.out, raw...)
	switch {
	case f.wrapped:
		b.appendLoopWrapEnd(f.headerSeg)
		if f.versioned {
			b.appendCountedExit()
		}
	case f.kind == frameIf || (f.kind == frameBlock && f.targeted):
		b.newSegment(holePay, false)
	}
}

// label translates a label of the original code into the rewritten code,
// where wrapped loops have added frames.
func (b *bodyRewriter) label(l uint32) uint32 {
	inner := b.ctrl[len(b.ctrl)-1].added
	return l + uint32(inner-b.ctrl[len(b.ctrl)-1-int(l)].added)
}

// target marks the frame a branch goes to and reports whether the branch
// is a back edge that must check.
func (b *bodyRewriter) target(l uint32) (backEdge bool) {
	f := &b.ctrl[len(b.ctrl)-1-int(l)]
	f.targeted = true
	return f.wrapped && !f.headerChecked && b.live() && !b.forward[b.at]
}

// branch handles br and br_if, and return, which is a br to $body. A back
// edge to a wrapped loop checks the counter first and leaves for the
// safepoint when there is no fuel left; for br_if that check must only run
// when the branch is taken, so it becomes an if around a br.
func (b *bodyRewriter) branch(op wasmbin.Opcode, l uint32) {
	backEdge := b.target(l)
	nl := b.label(l)
	switch {
	case backEdge && op == wasmbin.OpBr:
		b.appendBackEdgeCheck(nl + 1)
		b.out = appendOp(b.out, wasmbin.OpBr, nl)
	case backEdge:
		b.out = append(b.out, byte(wasmbin.OpIf), blockEmpty)
		b.appendBackEdgeCheck(nl + 2)
		b.out = appendOp(b.out, wasmbin.OpBr, nl+1)
		b.out = append(b.out, byte(wasmbin.OpEnd))
	default:
		b.out = appendOp(b.out, op, nl)
	}
	if op == wasmbin.OpBrIf {
		b.split(holePay, false)
	} else {
		b.seg = -1
	}
}

// branchTable handles br_table, whose targets are never wrapped loops.
func (b *bodyRewriter) branchTable(labels []uint32) {
	for _, l := range labels {
		b.target(l)
	}
	b.out = append(b.out, byte(wasmbin.OpBrTable))
	b.out = wasmbin.AppendU32(b.out, uint32(len(labels)-1))
	for _, l := range labels {
		b.out = wasmbin.AppendU32(b.out, b.label(l))
	}
	b.seg = -1
}

// call turns a call to a defined function into a call to its twin, which
// takes and returns the counter:
//
//	local.get $counter; call $twin; local.set $counter
//
// That sequence is needed even in unreachable code, where a block may
// still typecheck its operands. A call to an import flushes the counter
// for the host to read; host functions do not change it. Either way the
// segment ends: that the callee may not return (proc_exit) keeps the
// instructions after it from being charged.
func (b *bodyRewriter) call(in *wasmbin.Instr) {
	callee := in.Index
	if b.checkedCall(in) {
		b.checkSegment()
	}
	if callee < b.l.importedFuncs {
		b.appendFlush()
		b.out = appendOp(b.out, wasmbin.OpCall, callee)
		b.split(holePay, false)
		return
	}
	b.out = appendOp(b.out, wasmbin.OpLocalGet, b.counter)
	b.out = appendOp(b.out, wasmbin.OpCall, b.l.twin(callee))
	b.out = appendOp(b.out, wasmbin.OpLocalSet, b.counter)
	b.splitAfterCall(b.plans[callee-b.l.importedFuncs].countDepth)
}

// splitAfterCall starts the segment after a call to a twin, whose payment
// also lowers the depth if the callee raised it.
func (b *bodyRewriter) splitAfterCall(counted bool) {
	b.split(holePay, false)
	if counted && b.live() {
		b.segs[b.seg].callReturn = true
	}
}

// callIndirect checks before a call through a table, since the callee is
// unknown. With direct tables the callee is a twin, passed the counter
// under the index, which a scratch local moves out of the way:
//
//	local.set $tmp; local.get $counter; local.get $tmp
//	call_indirect (type $twin_type) $table
//	local.set $counter
//
// Otherwise it is a wrapper, which reads and writes the counter global.
func (b *bodyRewriter) callIndirect(in *wasmbin.Instr, raw []byte) {
	b.checkSegment()
	if !b.l.directTables {
		b.appendFlush()
		b.out = append(b.out, raw...)
		b.split(holeLoad, false)
		return
	}
	b.usesTmp = true
	b.out = appendOp(b.out, wasmbin.OpLocalSet, b.tmp)
	b.out = appendOp(b.out, wasmbin.OpLocalGet, b.counter)
	b.out = appendOp(b.out, wasmbin.OpLocalGet, b.tmp)
	b.out = appendOp(b.out, wasmbin.OpCallIndirect, b.l.twinTypes[in.Index])
	b.out = wasmbin.AppendU32(b.out, in.Index2)
	b.out = appendOp(b.out, wasmbin.OpLocalSet, b.counter)
	b.splitAfterCall(true) // a twin in a table escapes, so it counts
}

// assemble appends the finished body, with its size prefix, to dst.
func (b *bodyRewriter) assemble(dst []byte, locals localDecls) []byte {
	body := b.appendLocals(nil, locals)
	prev := 0
	for _, h := range b.holes {
		body = append(body, b.out[prev:h.at]...)
		body = b.appendHole(body, h)
		prev = h.at
	}
	body = append(body, b.out[prev:]...)
	dst = wasmbin.AppendU32(dst, uint32(len(body)))
	return append(dst, body...)
}

// appendLocals declares the function's own locals, followed by a scratch
// i32 if a dynamic cost needs one.
func (b *bodyRewriter) appendLocals(dst []byte, locals localDecls) []byte {
	switch {
	case b.usesTmp64:
		dst = wasmbin.AppendU32(dst, locals.groups+2)
		dst = append(dst, locals.raw...)
		return append(dst, 1, valI32, 1, valI64)
	case b.usesTmp:
		dst = wasmbin.AppendU32(dst, locals.groups+1)
		dst = append(dst, locals.raw...)
		return append(dst, 1, valI32)
	}
	dst = wasmbin.AppendU32(dst, locals.groups)
	return append(dst, locals.raw...)
}

// tmp64 is the scratch i64 local of counted loops, after tmp.
func (b *bodyRewriter) tmp64() uint32 { return b.tmp + 1 }
