package meter

import (
	"math"
	"math/bits"

	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// A counted loop is a tight loop whose trip count the guest can work out
// when it enters it: its body is one segment with nothing that can trap
// but loads and stores, and it ends
//
//	local.get $j; <x>; i32.add; local.tee $j; <n>; <cmp>; br_if 0
//
// (the add's operands either way round) with x and n constants or locals
// the body leaves alone, and $j written nowhere else in it. cmp is
// i32.lt_s or i32.lt_u with a positive step, or i32.ne with a constant
// step.
//
// Such a loop is versioned: on entry the guest computes the trip count t
// and, when t iterations fit in the fuel left in the slice, pays for all of
// them at once and runs an unmetered copy of the loop; otherwise it runs
// the loop metered as any other. Both ways consume the same fuel and reach
// the same safepoints: a loop that fits in the slice never meets a failing
// check, and one that does not fit runs its checks. What the copy saves is
// the counter: it is not live in the loop, so wazero's register allocator
// cannot spill it there (RATIONALE.md, "The worst case").
type countedLoop struct {
	j    uint32         // the induction variable, as the original numbers locals
	x, n operand        // the step and the bound
	cmp  wasmbin.Opcode // i32.lt_s, i32.lt_u or i32.ne
	cost int64          // of one iteration
	end  int            // index in instrs of the loop's end
}

// operand is an i32 constant or a local the loop does not write.
type operand struct {
	local bool
	value uint32 // the local's index, or the constant's bits
}

// maxCountedCost keeps t * cost << depthBits, t up to 2^32, inside 2^58.
const maxCountedCost = 1 << 10

func operandOf(in *wasmbin.Instr) (operand, bool) {
	switch in.Op {
	case wasmbin.OpI32Const:
		return operand{value: in.Index}, true
	case wasmbin.OpLocalGet:
		return operand{local: true, value: in.Index}, true
	}
	return operand{}, false
}

// writes reports whether in sets local l.
func writes(in *wasmbin.Instr, l uint32) bool {
	return (in.Op == wasmbin.OpLocalSet || in.Op == wasmbin.OpLocalTee) && in.Index == l
}

// countedLoopAt reports whether the loop whose opcode is instrs[start] and
// whose end is instrs[end] is a counted loop.
func (b *bodyRewriter) countedLoopAt(start, end int) (countedLoop, bool) {
	body := b.instrs[start+1 : end]
	if b.instrs[start].BlockType != blockEmptyType || len(body) < 7 {
		return countedLoop{}, false
	}
	tail := body[len(body)-7:]
	j := tail[3].Index
	step := &tail[1] // the add's operands may come either way round
	if tail[0].Op != wasmbin.OpLocalGet || tail[0].Index != j {
		step = &tail[0]
		if tail[1].Op != wasmbin.OpLocalGet || tail[1].Index != j {
			return countedLoop{}, false
		}
	}
	x, okX := operandOf(step)
	n, okN := operandOf(&tail[4])
	if !okX || !okN || tail[2].Op != wasmbin.OpI32Add || tail[3].Op != wasmbin.OpLocalTee ||
		tail[6].Op != wasmbin.OpBrIf || tail[6].Index != 0 || (x.local && x.value == j) || (n.local && n.value == j) {
		return countedLoop{}, false
	}
	cl := countedLoop{j: j, x: x, n: n, cmp: tail[5].Op, end: end}
	switch cl.cmp {
	case wasmbin.OpI32LtS:
		if !x.local && int32(x.value) <= 0 {
			return countedLoop{}, false
		}
	case wasmbin.OpI32LtU:
		if !x.local && x.value == 0 {
			return countedLoop{}, false
		}
	case wasmbin.OpI32Ne:
		if x.local || x.value == 0 {
			return countedLoop{}, false
		}
	default:
		return countedLoop{}, false
	}
	for i := range body {
		in := &body[i]
		cl.cost += staticCost(in.Op)
		if i == len(body)-1 {
			break // the br_if
		}
		_, _, dynamic := dynamicCost(in.Op)
		if endsSegment(in.Op) || canTrap(in.Op) || dynamic || (x.local && writes(in, x.value)) ||
			(n.local && writes(in, n.value)) || (i != len(body)-4 && writes(in, j)) {
			return countedLoop{}, false
		}
	}
	return cl, cl.cost <= maxCountedCost
}

// appendCountedEntry emits what a counted loop starts with: the trip count,
// and if its cost fits in the slice the payment and the unmetered copy.
// The metered loop follows in the else arm, and appendCountedExit closes
// the if after it:
//
//	<guard: the model of the loop in i64 is exact>
//	if (result i32)
//	  local.get $counter; <trip count>; i64.const cost<<16; i64.mul; i64.sub
//	  local.tee $tmp64; i64.const 0; i64.ge_s
//	else
//	  i32.const 0
//	end
//	if
//	  local.get $tmp64; local.set $counter
//	  loop <the original body> end
//	else
//	  <the metered loop>
//	end
func (b *bodyRewriter) appendCountedEntry(cl *countedLoop) {
	b.usesTmp64 = true
	b.appendCountedGuard(cl)
	b.out = append(b.out, byte(wasmbin.OpIf), valI32)
	b.out = appendOp(b.out, wasmbin.OpLocalGet, b.counter)
	b.appendTripCount(cl)
	b.out = append(b.out, byte(wasmbin.OpI64Const))
	b.out = wasmbin.AppendS64(b.out, cl.cost*fuelUnit)
	b.out = append(b.out, byte(wasmbin.OpI64Mul), byte(wasmbin.OpI64Sub))
	b.out = appendOp(b.out, wasmbin.OpLocalTee, b.tmp64())
	b.out = append(b.out, byte(wasmbin.OpI64Const), 0, byte(wasmbin.OpI64GeS))
	b.out = append(b.out, byte(wasmbin.OpElse), byte(wasmbin.OpI32Const), 0, byte(wasmbin.OpEnd))
	b.out = append(b.out, byte(wasmbin.OpIf), blockEmpty)
	b.out = appendOp(b.out, wasmbin.OpLocalGet, b.tmp64())
	b.out = appendOp(b.out, wasmbin.OpLocalSet, b.counter)
	b.out = append(b.out, byte(wasmbin.OpLoop), blockEmpty)
	for i := b.at + 1; i < cl.end; i++ {
		b.appendUnmetered(&b.instrs[i])
	}
	b.out = append(b.out, byte(wasmbin.OpEnd), byte(wasmbin.OpElse))
}

// appendCountedExit closes the if appendCountedEntry opened, after the
// metered loop. The segment after the metered loop's br_if paid for what
// follows the loop only on that arm, so a new one starts here.
func (b *bodyRewriter) appendCountedExit() {
	b.out = append(b.out, byte(wasmbin.OpEnd))
	b.split(holePay, false)
}

// appendUnmetered copies an instruction of the body, its locals moved past
// the counter.
func (b *bodyRewriter) appendUnmetered(in *wasmbin.Instr) {
	switch in.Op {
	case wasmbin.OpLocalGet, wasmbin.OpLocalSet, wasmbin.OpLocalTee:
		b.out = appendOp(b.out, in.Op, b.local(in.Index))
	case wasmbin.OpRefFunc:
		b.out = appendOp(b.out, wasmbin.OpRefFunc, b.l.refFunc(in.Index))
	default:
		b.out = append(b.out, b.src.Slice(in.Start, in.End)...)
	}
}

// appendCountedGuard pushes whether the trip count is what
// appendTripCount computes. For lt, the model in i64 is exact when no
// value of $j wraps: $j takes j0, j0+x, ..., and the last is below n+x,
// so j0+x and n+x-1 must fit. For ne, $j meets n after d/|x| steps
// without wrapping when d, n - j0 (mod 2^32) the way $j runs, is a
// positive multiple of |x|; d is left in $tmp64.
func (b *bodyRewriter) appendCountedGuard(cl *countedLoop) {
	if cl.cmp == wasmbin.OpI32Ne {
		from, to, step := neDistance(cl)
		b.appendI64(to, false)
		b.appendI64(from, false)
		b.out = append(b.out, byte(wasmbin.OpI64Sub), byte(wasmbin.OpI64Const))
		b.out = wasmbin.AppendS64(b.out, math.MaxUint32)
		b.out = append(b.out, byte(wasmbin.OpI64And))
		b.out = appendOp(b.out, wasmbin.OpLocalTee, b.tmp64())
		b.out = append(b.out, byte(wasmbin.OpI64Eqz), byte(wasmbin.OpI32Eqz))
		b.out = appendOp(b.out, wasmbin.OpLocalGet, b.tmp64())
		b.out = append(b.out, byte(wasmbin.OpI64Const))
		if step&(step-1) == 0 {
			b.out = wasmbin.AppendS64(b.out, step-1)
			b.out = append(b.out, byte(wasmbin.OpI64And))
		} else {
			b.out = wasmbin.AppendS64(b.out, step)
			b.out = append(b.out, byte(wasmbin.OpI64RemU))
		}
		b.out = append(b.out, byte(wasmbin.OpI64Eqz), byte(wasmbin.OpI32And))
		return
	}
	signed := cl.cmp == wasmbin.OpI32LtS
	limit := int64(math.MaxUint32)
	if signed {
		limit = math.MaxInt32
	}
	if cl.x.local {
		b.out = appendOp(b.out, wasmbin.OpLocalGet, b.local(cl.x.value))
		if signed {
			b.out = append(b.out, byte(wasmbin.OpI32Const), 0, byte(wasmbin.OpI32GtS))
		} else {
			b.out = append(b.out, byte(wasmbin.OpI32Eqz), byte(wasmbin.OpI32Eqz))
		}
	}
	b.appendI64(operand{local: true, value: cl.j}, signed)
	b.appendI64(cl.x, signed)
	b.out = append(b.out, byte(wasmbin.OpI64Add), byte(wasmbin.OpI64Const))
	b.out = wasmbin.AppendS64(b.out, limit)
	b.out = append(b.out, byte(wasmbin.OpI64GtS), byte(wasmbin.OpI32Eqz))
	b.appendI64(cl.n, signed)
	b.appendI64(cl.x, signed)
	b.out = append(b.out, byte(wasmbin.OpI64Add), byte(wasmbin.OpI64Const))
	b.out = wasmbin.AppendS64(b.out, limit+1)
	b.out = append(b.out, byte(wasmbin.OpI64GtS), byte(wasmbin.OpI32Eqz), byte(wasmbin.OpI32And))
	if cl.x.local {
		b.out = append(b.out, byte(wasmbin.OpI32And))
	}
}

// neDistance says which way $j runs towards n, and how far a step takes it.
func neDistance(cl *countedLoop) (from, to operand, step int64) {
	from, to = operand{local: true, value: cl.j}, cl.n
	step = int64(int32(cl.x.value))
	if step < 0 {
		return to, from, -step
	}
	return from, to, step
}

// appendTripCount pushes the number of iterations the loop will run, at
// least one, as an i64, once appendCountedGuard has passed:
//
//	lt: max(1, (n - j0 + x - 1) / x), or max(1, n - j0) for x = 1
//	ne: d / |x|, d being in $tmp64
func (b *bodyRewriter) appendTripCount(cl *countedLoop) {
	j := operand{local: true, value: cl.j}
	if cl.cmp == wasmbin.OpI32Ne {
		_, _, step := neDistance(cl)
		b.out = appendOp(b.out, wasmbin.OpLocalGet, b.tmp64())
		switch {
		case step == 1:
		case step&(step-1) == 0:
			b.out = append(b.out, byte(wasmbin.OpI64Const))
			b.out = wasmbin.AppendS64(b.out, int64(bits.TrailingZeros64(uint64(step))))
			b.out = append(b.out, byte(wasmbin.OpI64ShrU))
		default:
			b.out = append(b.out, byte(wasmbin.OpI64Const))
			b.out = wasmbin.AppendS64(b.out, step)
			b.out = append(b.out, byte(wasmbin.OpI64DivU))
		}
		return
	}
	signed := cl.cmp == wasmbin.OpI32LtS
	b.appendI64(cl.n, signed)
	b.appendI64(j, signed)
	b.out = append(b.out, byte(wasmbin.OpI64Sub))
	if cl.x.local || cl.x.value != 1 {
		b.appendI64(cl.x, signed)
		b.out = append(b.out, byte(wasmbin.OpI64Add), byte(wasmbin.OpI64Const), 1, byte(wasmbin.OpI64Sub))
		b.appendI64(cl.x, signed)
		b.out = append(b.out, byte(wasmbin.OpI64DivS))
	}
	// max(q, 1)
	b.out = appendOp(b.out, wasmbin.OpLocalTee, b.tmp64())
	b.out = append(b.out, byte(wasmbin.OpI64Const), 1)
	b.out = appendOp(b.out, wasmbin.OpLocalGet, b.tmp64())
	b.out = append(b.out, byte(wasmbin.OpI64Const), 1, byte(wasmbin.OpI64GtS), byte(wasmbin.OpSelect))
}

// appendI64 pushes an operand widened to i64.
func (b *bodyRewriter) appendI64(o operand, signed bool) {
	if !o.local {
		v := int64(o.value)
		if signed {
			v = int64(int32(o.value))
		}
		b.out = append(b.out, byte(wasmbin.OpI64Const))
		b.out = wasmbin.AppendS64(b.out, v)
		return
	}
	b.out = appendOp(b.out, wasmbin.OpLocalGet, b.local(o.value))
	if signed {
		b.out = append(b.out, byte(wasmbin.OpI64ExtendS))
	} else {
		b.out = append(b.out, byte(wasmbin.OpI64ExtendU))
	}
}
