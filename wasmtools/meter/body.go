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
	holeLoop                   // pay, check (a loop header)
	holePrepay                 // pay
	holeReload                 // load the counter from the global after a call, pay
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

type frame struct {
	kind     frameKind
	targeted bool // some branch goes to this frame's label
}

// bodyRewriter instruments one function body at a time. It is reused
// across the bodies of a module to keep its buffers.
type bodyRewriter struct {
	l        *layout
	maxDepth uint32

	out   []byte // instructions with holes cut out
	holes []hole
	segs  []int64 // cost of each segment
	ctrl  []frame
	seg   int // the current segment, or -1 in unreachable code
	in    wasmbin.Instr

	fuel, depth, tmp uint32 // local indices added to the function
	usesTmp          bool
}

// rewrite appends the instrumented form of body, the code entry of a
// function with nparams parameters, to dst.
func (b *bodyRewriter) rewrite(dst, body []byte, nparams uint32) ([]byte, error) {
	r := wasmbin.NewReader(body)
	locals, err := readLocals(r)
	if err != nil {
		return nil, err
	}
	b.reset(nparams + locals.count)
	if err := b.instructions(r); err != nil {
		return nil, err
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

func (b *bodyRewriter) reset(firstNew uint32) {
	b.out, b.holes, b.segs, b.ctrl = b.out[:0], b.holes[:0], b.segs[:0], b.ctrl[:0]
	b.fuel, b.depth, b.tmp = firstNew, firstNew+1, firstNew+2
	b.usesTmp = false
}

func (b *bodyRewriter) instructions(r *wasmbin.Reader) error {
	b.ctrl = append(b.ctrl, frame{kind: frameFunc})
	b.newSegment(holeEntry)
	b.appendDepthEntry()
	for len(b.ctrl) > 0 {
		if err := r.ReadInstr(&b.in); err != nil {
			return err
		}
		b.instruction(r.Slice(b.in.Start, b.in.End))
	}
	if r.Len() != 0 {
		return fmt.Errorf("%d bytes after the end of the body", r.Len())
	}
	return nil
}

// instruction copies one instruction to the output with the
// instrumentation it calls for. raw is its encoding.
func (b *bodyRewriter) instruction(raw []byte) {
	in := &b.in
	b.charge(staticCost(in.Op))
	switch in.Op {
	case wasmbin.OpBlock:
		b.push(frameBlock, raw)
	case wasmbin.OpLoop:
		b.push(frameLoop, raw)
		b.split(holeLoop)
	case wasmbin.OpIf:
		b.push(frameIf, raw)
		b.split(holePrepay)
	case wasmbin.OpElse:
		b.out = append(b.out, raw...)
		b.newSegment(holePrepay)
	case wasmbin.OpEnd:
		b.end(raw)
	case wasmbin.OpBr, wasmbin.OpBrIf:
		b.branch(raw, in.Index)
	case wasmbin.OpBrTable:
		b.branch(raw, in.Labels...)
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
		b.split(holeReload)
	case wasmbin.OpRefFunc:
		b.out = append(b.out, byte(wasmbin.OpRefFunc))
		b.out = wasmbin.AppendU32(b.out, b.l.remapFunc(in.Index))
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

func (b *bodyRewriter) push(kind frameKind, raw []byte) {
	b.ctrl = append(b.ctrl, frame{kind: kind})
	b.out = append(b.out, raw...)
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
	if f.kind == frameIf || (f.kind == frameBlock && f.targeted) {
		b.newSegment(holePrepay)
	}
}

// branch handles br, br_if and br_table. A branch to the function's own
// label is a return and flushes like one.
func (b *bodyRewriter) branch(raw []byte, labels ...uint32) {
	returns := false
	for _, l := range labels {
		i := len(b.ctrl) - 1 - int(l)
		b.ctrl[i].targeted = true
		returns = returns || i == 0
	}
	if returns {
		b.appendExit()
	}
	b.out = append(b.out, raw...)
	if b.in.Op == wasmbin.OpBrIf {
		b.split(holePrepay)
	} else {
		b.seg = -1
	}
}

// call flushes the counter for the callee and reloads what the callee left.
// A call to an import needs no reload: host functions do not touch the
// counter. It still splits the segment, so that fuel for the instructions
// after a call to proc_exit, which never returns, is never charged.
func (b *bodyRewriter) call(callee uint32) {
	b.appendFlush()
	b.out = append(b.out, byte(wasmbin.OpCall))
	b.out = wasmbin.AppendU32(b.out, b.l.remapFunc(callee))
	if callee < b.l.importedFuncs {
		b.split(holePrepay)
	} else {
		b.split(holeReload)
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
// the saved depth and, if a dynamic cost needs it, a scratch i32.
func (b *bodyRewriter) appendLocals(dst []byte, locals localDecls) []byte {
	added := []byte{1, valI64, 1, valI32}
	if b.usesTmp {
		added = append(added, 1, valI32)
	}
	dst = wasmbin.AppendU32(dst, locals.groups+uint32(len(added)/2))
	dst = append(dst, locals.raw...)
	return append(dst, added...)
}
