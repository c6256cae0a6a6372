package meter

import "github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"

// Value type and block type bytes used in emitted code.
const (
	valI32     = 0x7f
	valI64     = 0x7e
	blockEmpty = 0x40
)

// The sequences below are what the instrumentation adds to a function.
// Each one leaves the operand stack as it found it, so it is valid
// wherever it is inserted. Those that branch only branch to labels they
// open themselves or to the frames around a wrapped loop.

// appendHole emits the payment for segment h.seg.
func (b *bodyRewriter) appendHole(dst []byte, h hole) []byte {
	cost := b.segs[h.seg]
	switch h.kind {
	case holeEntry:
		dst = appendOp(dst, wasmbin.OpGlobalGet, b.l.fuelGlobal)
		dst = appendSub(dst, cost)
		dst = appendOp(dst, wasmbin.OpLocalTee, b.fuel)
		return b.appendCheck(dst)
	case holeLoad:
		dst = appendOp(dst, wasmbin.OpGlobalGet, b.l.fuelGlobal)
		dst = appendSub(dst, cost)
		return appendOp(dst, wasmbin.OpLocalSet, b.fuel)
	case holeLoop:
		dst = appendOp(dst, wasmbin.OpLocalGet, b.fuel)
		if cost != 0 {
			dst = appendSub(dst, cost)
			dst = appendOp(dst, wasmbin.OpLocalTee, b.fuel)
		}
		return b.appendCheck(dst)
	default: // holePrepay
		if cost == 0 {
			return dst
		}
		dst = appendOp(dst, wasmbin.OpLocalGet, b.fuel)
		dst = appendSub(dst, cost)
		return appendOp(dst, wasmbin.OpLocalSet, b.fuel)
	}
}

// appendSub subtracts cost from the i64 on top of the stack.
func appendSub(dst []byte, cost int64) []byte {
	if cost == 0 {
		return dst
	}
	dst = append(dst, byte(wasmbin.OpI64Const))
	dst = wasmbin.AppendS64(dst, cost)
	return append(dst, byte(wasmbin.OpI64Sub))
}

// appendCheck consumes the counter on top of the stack and calls the
// safepoint when it is not positive:
//
//	i64.const 0; i64.le_s
//	if <safepoint> end
func (b *bodyRewriter) appendCheck(dst []byte) []byte {
	dst = append(dst, byte(wasmbin.OpI64Const), 0, byte(wasmbin.OpI64LeS), byte(wasmbin.OpIf), blockEmpty)
	dst = b.appendSafepoint(dst)
	return append(dst, byte(wasmbin.OpEnd))
}

// appendSafepoint calls the host to account for the counter and refill it.
// The call is a call like any other: the counter is flushed before and
// reloaded after, since the host reads and writes the global.
//
//	local.get $fuel; global.set $__fuel
//	i32.const 0; call $safepoint
//	global.get $__fuel; local.set $fuel
func (b *bodyRewriter) appendSafepoint(dst []byte) []byte {
	dst = b.appendCounterFlush(dst)
	dst = append(dst, byte(wasmbin.OpI32Const), reasonFuel)
	dst = appendOp(dst, wasmbin.OpCall, b.l.safepointFunc)
	dst = appendOp(dst, wasmbin.OpGlobalGet, b.l.fuelGlobal)
	return appendOp(dst, wasmbin.OpLocalSet, b.fuel)
}

// appendBackEdgeCheck leaves for the wrapped loop's $slow block, at label
// slow, when the counter is not positive:
//
//	local.get $fuel; i64.const 0; i64.le_s; br_if $slow
func (b *bodyRewriter) appendBackEdgeCheck(slow uint32) {
	b.out = appendOp(b.out, wasmbin.OpLocalGet, b.fuel)
	b.out = append(b.out, byte(wasmbin.OpI64Const), 0, byte(wasmbin.OpI64LeS))
	b.out = appendOp(b.out, wasmbin.OpBrIf, slow)
}

// appendLoopWrapEnd closes the frames around a wrapped loop, whose own end
// has just been emitted. See wrapFrames for the shape.
func (b *bodyRewriter) appendLoopWrapEnd() {
	o := append(b.out, byte(wasmbin.OpBr), 2, byte(wasmbin.OpEnd))
	o = b.appendSafepoint(o)
	b.out = append(o, byte(wasmbin.OpBr), 0, byte(wasmbin.OpEnd), byte(wasmbin.OpUnreachable), byte(wasmbin.OpEnd))
}

// appendDepthEntry counts this call against the depth limit and saves the
// depth on entry in a local, which the exits restore without reloading:
//
//	global.get $__depth; local.tee $depth
//	i32.const max; i32.ge_u
//	if
//	  local.get $fuel; global.set $__fuel
//	  i32.const 1; call $safepoint; unreachable
//	end
//	local.get $depth; i32.const 1; i32.add; global.set $__depth
func (b *bodyRewriter) appendDepthEntry() {
	o := appendOp(b.out, wasmbin.OpGlobalGet, b.l.depthGlobal)
	o = appendOp(o, wasmbin.OpLocalTee, b.depth)
	o = append(o, byte(wasmbin.OpI32Const))
	o = wasmbin.AppendS64(o, int64(b.maxDepth))
	o = append(o, byte(wasmbin.OpI32GeU), byte(wasmbin.OpIf), blockEmpty)
	o = b.appendCounterFlush(o)
	o = append(o, byte(wasmbin.OpI32Const), reasonDepth)
	o = appendOp(o, wasmbin.OpCall, b.l.safepointFunc)
	o = append(o, byte(wasmbin.OpUnreachable), byte(wasmbin.OpEnd))
	o = appendOp(o, wasmbin.OpLocalGet, b.depth)
	o = append(o, byte(wasmbin.OpI32Const), 1, byte(wasmbin.OpI32Add))
	b.out = appendOp(o, wasmbin.OpGlobalSet, b.l.depthGlobal)
}

// appendFlush stores the counter for a callee or the host to read.
func (b *bodyRewriter) appendFlush() {
	if b.live() {
		b.out = b.appendCounterFlush(b.out)
	}
}

// appendExit flushes the counter and restores the depth before the
// function returns, checking first if the plan says so.
func (b *bodyRewriter) appendExit() {
	if !b.live() {
		return
	}
	if b.plan.exitCheck {
		b.appendCounterCheck()
	}
	b.out = b.appendCounterFlush(b.out)
	if b.plan.countDepth {
		b.out = appendOp(b.out, wasmbin.OpLocalGet, b.depth)
		b.out = appendOp(b.out, wasmbin.OpGlobalSet, b.l.depthGlobal)
	}
}

// appendCounterCheck calls the safepoint if the counter is not positive.
func (b *bodyRewriter) appendCounterCheck() {
	b.out = appendOp(b.out, wasmbin.OpLocalGet, b.fuel)
	b.out = b.appendCheck(b.out)
}

func (b *bodyRewriter) appendCounterFlush(dst []byte) []byte {
	dst = appendOp(dst, wasmbin.OpLocalGet, b.fuel)
	return appendOp(dst, wasmbin.OpGlobalSet, b.l.fuelGlobal)
}

// appendDynamicCharge charges a size-dependent instruction for its length
// operand, which is on top of the stack, and checks before it runs:
//
//	local.tee $tmp
//	local.get $fuel
//	local.get $tmp; i64.extend_i32_u; i64.const shift; i64.shr_u (or i64.shl)
//	i64.sub; local.tee $fuel
//	check
func (b *bodyRewriter) appendDynamicCharge(op wasmbin.Opcode) {
	shift, grow, ok := dynamicCost(op)
	if !ok || !b.live() {
		return
	}
	b.usesTmp = true
	o := appendOp(b.out, wasmbin.OpLocalTee, b.tmp)
	o = appendOp(o, wasmbin.OpLocalGet, b.fuel)
	o = appendOp(o, wasmbin.OpLocalGet, b.tmp)
	o = append(o, byte(wasmbin.OpI64ExtendU), byte(wasmbin.OpI64Const), shift)
	if grow {
		o = append(o, byte(wasmbin.OpI64Shl))
	} else {
		o = append(o, byte(wasmbin.OpI64ShrU))
	}
	o = append(o, byte(wasmbin.OpI64Sub))
	o = appendOp(o, wasmbin.OpLocalTee, b.fuel)
	b.out = b.appendCheck(o)
}

// appendOp appends a single-byte opcode with one index immediate.
func appendOp(dst []byte, op wasmbin.Opcode, index uint32) []byte {
	return wasmbin.AppendU32(append(dst, byte(op)), index)
}
