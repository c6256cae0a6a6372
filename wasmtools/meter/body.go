package meter

import (
	"fmt"

	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// Safepoint reasons, the argument the guest passes to the host import.
const (
	reasonFuel  = 0 // the counter is not positive: account, check, refill
	reasonDepth = 1 // the call-depth limit was reached: trap
)

// A segment is a run of instructions that control enters only at its start
// and leaves only at its end, so its whole cost can be paid up front with
// one subtraction. A hole marks where that payment goes; its code is only
// known once the segment's end, and so its cost, has been seen.
type holeKind uint8

const (
	holeEntry  holeKind = iota // load the counter from the global, pay, check
	holeLoad                   // load the counter from the global, pay
	holeLoop                   // pay, check (the header of a loop that is not wrapped)
	holePrepay                 // pay
)

type hole struct {
	at   int // offset in bodyRewriter.out
	kind holeKind
	seg  int
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
// Every back edge checks the counter and leaves for $slow when it is not
// positive. This puts the safepoint call outside the loop: wazero's
// register allocator spills every value that is live across a call, even a
// call that never runs, so a call inside the loop would cost loads and
// stores on every iteration.
const wrapFrames = 3

type frame struct {
	kind     frameKind
	targeted bool // some branch goes to this frame's label
	wrapped  bool // a loop wrapped as above
	added    int  // frames the rewrite added outside this frame and the frames enclosing it
}

// bodyRewriter instruments one function body at a time. It is reused
// across the bodies of a module to keep its buffers.
type bodyRewriter struct {
	l        *layout
	maxDepth uint32
	plan     funcPlan

	instrs   []wasmbin.Instr // the body, decoded once
	wrapLoop []bool          // per loop, in order of appearance
	loops    int             // loops emitted so far

	out   []byte // instructions with holes cut out
	holes []hole
	segs  []int64 // cost of each segment
	ctrl  []frame
	seg   int // the current segment, or -1 in unreachable code

	fuel, depth, tmp uint32 // local indices added to the function
	usesTmp          bool
}

// rewrite appends the instrumented form of body, the code entry of a
// function with nparams parameters, to dst.
func (b *bodyRewriter) rewrite(dst, body []byte, nparams uint32, plan funcPlan) ([]byte, error) {
	r := wasmbin.NewReader(body)
	locals, err := readLocals(r)
	if err != nil {
		return nil, err
	}
	b.reset(nparams+locals.count, plan)
	if err := b.decode(r); err != nil {
		return nil, err
	}
	b.ctrl = append(b.ctrl, frame{kind: frameFunc})
	if plan.entryCheck {
		b.newSegment(holeEntry)
	} else {
		b.newSegment(holeLoad)
	}
	if plan.countDepth {
		b.appendDepthEntry()
	}
	for i := range b.instrs {
		b.instruction(&b.instrs[i], r.Slice(b.instrs[i].Start, b.instrs[i].End))
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
	groups, err := r.U32()
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
	// Keep the total, with the three locals added below, inside a uint32.
	if total > 1<<31 {
		return localDecls{}, fmt.Errorf("%d locals is too many", total)
	}
	return localDecls{groups: groups, raw: r.Slice(start, r.Pos()), count: uint32(total)}, nil
}

func (b *bodyRewriter) reset(firstNew uint32, plan funcPlan) {
	b.plan = plan
	b.instrs, b.wrapLoop, b.loops = b.instrs[:0], b.wrapLoop[:0], 0
	b.out, b.holes, b.segs, b.ctrl = b.out[:0], b.holes[:0], b.segs[:0], b.ctrl[:0]
	b.fuel = firstNew
	b.depth, b.tmp = firstNew+1, firstNew+1
	if plan.countDepth {
		b.tmp++
	}
	b.usesTmp = false
}

// decode reads the instructions of the body and decides which loops to
// wrap. A loop is wrapped unless it takes parameters, which the way back
// in from the safepoint could not supply, or is the target of a br_table,
// whose back edge cannot carry its own check.
func (b *bodyRewriter) decode(r *wasmbin.Reader) error {
	open := []int{-1} // per open frame: its loop number, or -1
	for len(open) > 0 {
		var in wasmbin.Instr
		if err := r.ReadInstr(&in); err != nil {
			return err
		}
		switch in.Op {
		case wasmbin.OpBlock, wasmbin.OpIf:
			open = append(open, -1)
		case wasmbin.OpLoop:
			open = append(open, len(b.wrapLoop))
			b.wrapLoop = append(b.wrapLoop, b.l.blockParams(in.BlockType) == 0)
		case wasmbin.OpEnd:
			open = open[:len(open)-1]
		case wasmbin.OpBrTable:
			for _, l := range in.Labels {
				if loop := open[len(open)-1-int(l)]; loop >= 0 {
					b.wrapLoop[loop] = false
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

// instruction copies one instruction to the output with the
// instrumentation it calls for. raw is its encoding.
func (b *bodyRewriter) instruction(in *wasmbin.Instr, raw []byte) {
	b.charge(staticCost(in.Op))
	switch in.Op {
	case wasmbin.OpBlock:
		b.push(frame{kind: frameBlock}, raw)
	case wasmbin.OpLoop:
		b.loop(raw)
	case wasmbin.OpIf:
		b.push(frame{kind: frameIf}, raw)
		b.split(holePrepay)
	case wasmbin.OpElse:
		b.out = append(b.out, raw...)
		b.newSegment(holePrepay)
	case wasmbin.OpEnd:
		b.end(raw)
	case wasmbin.OpBr, wasmbin.OpBrIf:
		b.branch(in.Op, in.Index)
	case wasmbin.OpBrTable:
		b.branchTable(in.Labels)
	case wasmbin.OpReturn:
		b.appendExit()
		b.out = append(b.out, raw...)
		b.seg = -1
	case wasmbin.OpUnreachable:
		b.out = append(b.out, raw...)
		b.seg = -1
	case wasmbin.OpCall:
		b.call(in.Index)
	case wasmbin.OpCallIndirect:
		b.appendFlush()
		b.out = append(b.out, raw...)
		b.split(holeLoad)
	case wasmbin.OpRefFunc:
		b.out = appendOp(b.out, wasmbin.OpRefFunc, b.l.remapFunc(in.Index))
	default:
		b.appendDynamicCharge(in.Op)
		b.out = append(b.out, raw...)
	}
}

func (b *bodyRewriter) live() bool { return b.seg >= 0 }

func (b *bodyRewriter) charge(cost int64) {
	if b.live() {
		b.segs[b.seg] += cost
	}
}

// newSegment starts a segment whose payment goes at the current output
// position.
func (b *bodyRewriter) newSegment(kind holeKind) {
	b.segs = append(b.segs, 0)
	b.seg = len(b.segs) - 1
	b.holes = append(b.holes, hole{at: len(b.out), kind: kind, seg: b.seg})
}

// split ends the current segment. Unreachable code stays unreachable.
func (b *bodyRewriter) split(kind holeKind) {
	if b.live() {
		b.newSegment(kind)
	}
}

func (b *bodyRewriter) push(f frame, raw []byte) {
	f.added = b.ctrl[len(b.ctrl)-1].added
	if f.wrapped {
		f.added += wrapFrames
	}
	b.ctrl = append(b.ctrl, f)
	b.out = append(b.out, raw...)
}

// loop opens a loop, wrapped or not. The header of a wrapped loop only
// pays: its back edges check.
func (b *bodyRewriter) loop(raw []byte) {
	wrap := b.wrapLoop[b.loops]
	b.loops++
	if !wrap {
		b.push(frame{kind: frameLoop}, raw)
		b.split(holeLoop)
		return
	}
	// $exit takes the loop's block type, which follows its opcode.
	b.out = append(b.out, byte(wasmbin.OpBlock))
	b.out = append(b.out, raw[1:]...)
	b.out = append(b.out, byte(wasmbin.OpLoop), blockEmpty, byte(wasmbin.OpBlock), blockEmpty)
	b.push(frame{kind: frameLoop, wrapped: true}, raw)
	b.split(holePrepay)
}

// end closes a frame. Control arrives after the end of an if from two
// places, and after a block from every branch to it, so a new segment
// starts there. After a loop, or a block nothing branches to, control only
// falls through, and the current segment goes on.
func (b *bodyRewriter) end(raw []byte) {
	f := b.ctrl[len(b.ctrl)-1]
	b.ctrl = b.ctrl[:len(b.ctrl)-1]
	if f.kind == frameFunc {
		b.appendExit()
		b.out = append(b.out, raw...)
		return
	}
	b.out = append(b.out, raw...)
	switch {
	case f.wrapped:
		b.appendLoopWrapEnd()
	case f.kind == frameIf || (f.kind == frameBlock && f.targeted):
		b.newSegment(holePrepay)
	}
}

// label translates a label of the original code into the rewritten code,
// where wrapped loops have added frames.
func (b *bodyRewriter) label(l uint32) uint32 {
	inner := b.ctrl[len(b.ctrl)-1].added
	return l + uint32(inner-b.ctrl[len(b.ctrl)-1-int(l)].added)
}

// target marks the frame a branch goes to and reports whether the branch
// leaves the function and whether it is a back edge that must check.
func (b *bodyRewriter) target(l uint32) (returns, backEdge bool) {
	i := len(b.ctrl) - 1 - int(l)
	f := &b.ctrl[i]
	f.targeted = true
	return i == 0, f.wrapped && b.live()
}

// branch handles br and br_if. A branch to the function's own label is a
// return and flushes like one. A back edge to a wrapped loop checks the
// counter first and leaves for the safepoint when it is not positive; for
// br_if that check must only run when the branch is taken, so it becomes
// an if around a br.
func (b *bodyRewriter) branch(op wasmbin.Opcode, l uint32) {
	returns, backEdge := b.target(l)
	if returns {
		b.appendExit()
	}
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
		b.split(holePrepay)
	} else {
		b.seg = -1
	}
}

// branchTable handles br_table, whose targets are never wrapped loops.
func (b *bodyRewriter) branchTable(labels []uint32) {
	anyReturns := false
	for _, l := range labels {
		returns, _ := b.target(l)
		anyReturns = anyReturns || returns
	}
	if anyReturns {
		b.appendExit()
	}
	b.out = append(b.out, byte(wasmbin.OpBrTable))
	b.out = wasmbin.AppendU32(b.out, uint32(len(labels)-1))
	for _, l := range labels {
		b.out = wasmbin.AppendU32(b.out, b.label(l))
	}
	b.seg = -1
}

// call flushes the counter for the callee and reloads what the callee left.
// A call to an import checks the counter first, so that no host function
// (fd_write, proc_exit) runs once the budget is spent; it needs no reload,
// as host functions do not touch the counter. It still splits the
// segment, so that the instructions after a call to proc_exit, which never
// returns, are not charged.
func (b *bodyRewriter) call(callee uint32) {
	imported := callee < b.l.importedFuncs
	if imported && b.live() {
		b.appendCounterCheck()
	}
	b.appendFlush()
	b.out = appendOp(b.out, wasmbin.OpCall, b.l.remapFunc(callee))
	if imported {
		b.split(holePrepay)
	} else {
		b.split(holeLoad)
	}
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

// appendLocals declares the function's own locals followed by the counter,
// the saved depth if the function counts depth, and a scratch i32 if a
// dynamic cost needs one.
func (b *bodyRewriter) appendLocals(dst []byte, locals localDecls) []byte {
	added := []byte{1, valI64}
	if b.plan.countDepth {
		added = append(added, 1, valI32)
	}
	if b.usesTmp {
		added = append(added, 1, valI32)
	}
	dst = wasmbin.AppendU32(dst, locals.groups+uint32(len(added)/2))
	dst = append(dst, locals.raw...)
	return append(dst, added...)
}
