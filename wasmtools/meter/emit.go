package meter

import "github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"

// Value type and block type bytes used in emitted code.
const (
	valI32     = 0x7f
	valI64     = 0x7e
	blockEmpty = 0x40

	blockEmptyType = -64 // blockEmpty read as the s33 block type
)

// The sequences below are what the instrumentation adds to a function.
// Each one leaves the operand stack as it found it, so it is valid
// wherever it is inserted. Those that branch only branch to labels they
// open themselves or to the frames around a wrapped loop.

// appendHole emits the payment for segment h.seg, and its check.
func (b *bodyRewriter) appendHole(dst []byte, h hole) []byte {
	seg := b.segs[h.seg]
	charge := seg.cost * fuelUnit
	if h.kind == holeEntry && b.plan.countDepth {
		charge-- // one level deeper
	}
	if seg.callReturn {
		charge++ // the callee's level, which it left raised
	}
	switch {
	case h.kind == holeUndo:
		return b.appendAdd(dst, seg.cost*fuelUnit)
	case h.kind == holeLoad:
		dst = appendOp(dst, wasmbin.OpGlobalGet, b.l.counterGlobal)
		dst = appendSub(dst, charge)
		dst = appendOp(dst, wasmbin.OpLocalSet, b.counter)
	case charge != 0:
		dst = b.appendAdd(dst, -charge)
	}
	if seg.store {
		dst = b.appendCounterFlush(dst)
	}
	switch {
	case h.kind == holeHeader:
		// The header is inside the loop, one label in from $slow.
		dst = appendOp(dst, wasmbin.OpLocalGet, b.counter)
		dst = appendNoFuel(dst)
		return appendOp(dst, wasmbin.OpBrIf, 1)
	case seg.check:
		return b.appendCheck(dst)
	}
	return dst
}

// appendAdd adds n to the counter.
func (b *bodyRewriter) appendAdd(dst []byte, n int64) []byte {
	if n == 0 {
		return dst
	}
	dst = appendOp(dst, wasmbin.OpLocalGet, b.counter)
	dst = appendSub(dst, -n)
	return appendOp(dst, wasmbin.OpLocalSet, b.counter)
}

// appendSub subtracts n from the i64 on top of the stack.
func appendSub(dst []byte, n int64) []byte {
	if n == 0 {
		return dst
	}
	dst = append(dst, byte(wasmbin.OpI64Const))
	dst = wasmbin.AppendS64(dst, n)
	return append(dst, byte(wasmbin.OpI64Sub))
}

// appendNoFuel consumes the counter on top of the stack and leaves 1 if
// the slice is overspent, its fuel negative: i64.const 0; i64.lt_s.
func appendNoFuel(dst []byte) []byte {
	return append(dst, byte(wasmbin.OpI64Const), 0, byte(wasmbin.OpI64LtS))
}

// appendCheck calls the safepoint when the slice is overspent:
//
//	local.get $counter; i64.const 0; i64.lt_s
//	if <safepoint> end
//
// The shape matters under wazero's compiler, whose register allocator
// takes the state at a merge from one predecessor: measured against an
// if/else with an empty hot arm and a block left by br_if, this one cost
// least over the benchmark suite.
func (b *bodyRewriter) appendCheck(dst []byte) []byte {
	dst = appendOp(dst, wasmbin.OpLocalGet, b.counter)
	dst = appendNoFuel(dst)
	dst = append(dst, byte(wasmbin.OpIf), blockEmpty)
	dst = b.appendSafepoint(dst)
	return append(dst, byte(wasmbin.OpEnd))
}

// appendSafepoint calls the host to account for the counter and refill it.
// The call is a call like any other: the counter is flushed before and
// reloaded after, since the host reads and writes the global.
//
//	local.get $counter; global.set $__fuel
//	i32.const 0; call $safepoint
//	global.get $__fuel; local.set $counter
func (b *bodyRewriter) appendSafepoint(dst []byte) []byte {
	dst = b.appendCounterFlush(dst)
	dst = append(dst, byte(wasmbin.OpI32Const), reasonFuel)
	dst = appendOp(dst, wasmbin.OpCall, b.l.safepointFunc)
	dst = appendOp(dst, wasmbin.OpGlobalGet, b.l.counterGlobal)
	return appendOp(dst, wasmbin.OpLocalSet, b.counter)
}

// appendBackEdgeCheck leaves for the wrapped loop's $slow block, at label
// slow, when the slice is overspent:
//
//	local.get $counter; i64.const 0; i64.lt_s; br_if $slow
func (b *bodyRewriter) appendBackEdgeCheck(slow uint32) {
	b.out = appendOp(b.out, wasmbin.OpLocalGet, b.counter)
	b.out = appendNoFuel(b.out)
	b.out = appendOp(b.out, wasmbin.OpBrIf, slow)
}

// appendLoopWrapEnd closes the frames around a wrapped loop, whose own end
// has just been emitted. See wrapFrames for the shape. headerSeg is the
// segment a header-checked loop's header pays for, or -1.
func (b *bodyRewriter) appendLoopWrapEnd(headerSeg int) {
	b.out = append(b.out, byte(wasmbin.OpBr), 2, byte(wasmbin.OpEnd))
	b.out = b.appendSafepoint(b.out)
	if headerSeg >= 0 {
		b.holes = append(b.holes, hole{at: len(b.out), kind: holeUndo, seg: headerSeg})
	}
	b.out = append(b.out, byte(wasmbin.OpBr), 0, byte(wasmbin.OpEnd), byte(wasmbin.OpUnreachable), byte(wasmbin.OpEnd))
}

// appendDepthCheck traps when the depth, already counted by the entry
// payment, is past the limit:
//
//	local.get $counter; i64.const depthMask; i64.and
//	i64.const max; i64.gt_u
//	if
//	  local.get $counter; global.set $__fuel
//	  i32.const 1; call $safepoint; unreachable
//	end
func (b *bodyRewriter) appendDepthCheck() {
	o := appendOp(b.out, wasmbin.OpLocalGet, b.counter)
	o = append(o, byte(wasmbin.OpI64Const))
	o = wasmbin.AppendS64(o, depthMask)
	o = append(o, byte(wasmbin.OpI64And), byte(wasmbin.OpI64Const))
	o = wasmbin.AppendS64(o, int64(b.maxDepth))
	o = append(o, byte(wasmbin.OpI64GtU), byte(wasmbin.OpIf), blockEmpty)
	o = b.appendCounterFlush(o)
	o = append(o, byte(wasmbin.OpI32Const), reasonDepth)
	o = appendOp(o, wasmbin.OpCall, b.l.safepointFunc)
	b.out = append(o, byte(wasmbin.OpUnreachable), byte(wasmbin.OpEnd))
}

// appendFlush stores the counter for the host or a wrapper to read.
func (b *bodyRewriter) appendFlush() {
	if b.live() {
		b.out = b.appendCounterFlush(b.out)
	}
}

// appendExit ends the twin after $body: a host entry checks that the call
// stayed in budget, and the counter is returned after the function's
// results. The depth stays as it is; the caller lowers it.
func (b *bodyRewriter) appendExit() {
	if b.plan.hostEntry {
		b.out = b.appendCheck(b.out)
	}
	b.out = appendOp(b.out, wasmbin.OpLocalGet, b.counter)
}

func (b *bodyRewriter) appendCounterFlush(dst []byte) []byte {
	dst = appendOp(dst, wasmbin.OpLocalGet, b.counter)
	return appendOp(dst, wasmbin.OpGlobalSet, b.l.counterGlobal)
}

// appendDynamicCharge charges a size-dependent instruction for its length
// operand, which is on top of the stack, and checks before it runs:
//
//	local.tee $tmp
//	local.get $counter
//	local.get $tmp; i64.extend_i32_u
//	i64.const shift; i64.shr_u; i64.const depthBits; i64.shl   (memory.grow: one i64.shl)
//	i64.sub; local.set $counter
//	<check>
//	local.get $counter; global.set $__fuel   (unless a grow, which cannot trap)
//
// The shifts are below 64, so each i64.const is one byte.
func (b *bodyRewriter) appendDynamicCharge(op wasmbin.Opcode) {
	shift, grow, ok := dynamicCost(op)
	if !ok || !b.live() {
		return
	}
	b.usesTmp = true
	o := appendOp(b.out, wasmbin.OpLocalTee, b.tmp)
	o = appendOp(o, wasmbin.OpLocalGet, b.counter)
	o = appendOp(o, wasmbin.OpLocalGet, b.tmp)
	o = append(o, byte(wasmbin.OpI64ExtendU))
	if grow {
		o = append(o, byte(wasmbin.OpI64Const), shift+depthBits, byte(wasmbin.OpI64Shl))
	} else {
		o = append(o, byte(wasmbin.OpI64Const), shift, byte(wasmbin.OpI64ShrU))
		o = append(o, byte(wasmbin.OpI64Const), depthBits, byte(wasmbin.OpI64Shl))
	}
	o = append(o, byte(wasmbin.OpI64Sub))
	o = appendOp(o, wasmbin.OpLocalSet, b.counter)
	o = b.appendCheck(o)
	if canTrap(op) {
		o = b.appendCounterFlush(o)
	}
	b.out = o
}

// appendOp appends a single-byte opcode with one index immediate.
func appendOp(dst []byte, op wasmbin.Opcode, index uint32) []byte {
	return wasmbin.AppendU32(append(dst, byte(op)), index)
}
