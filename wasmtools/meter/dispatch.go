package meter

import "github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"

// A dispatch loop is a state machine, the shape Go's compiler gives every
// function:
//
//	loop $L
//	  block block ... block            ;; the ladder, n blocks
//	    local.get $state
//	    br_table 0 0 1 2 ...           ;; state → ladder label
//	  end  <code of region 0>
//	  end  <code of region 1>
//	  ...
//	end
//
// and a jump to another state is
//
//	i32.const K; local.set $state; br $L
//
// Within one iteration control only moves forward through the regions. So
// a back edge that jumps to a later region than its own cannot close a
// cycle on its own: any cycle must include a jump to the same or an
// earlier region, or a jump whose state is not a constant, and those keep
// their check. At most one iteration per region runs between checks.
// Leaving the others out matters because every jump of a Go program is
// such a back edge.
type dispatchLoop struct {
	frame  int      // index of the loop in the stack of open frames
	ladder int      // number of blocks in the ladder
	state  uint32   // the local the br_table reads
	table  []uint32 // the br_table's labels, default last
	ends   int      // ladder blocks closed so far: the region is ends-1
}

// findForwardJumps marks the back edges of dispatch loops that go to a
// later region, which need no check.
func (b *bodyRewriter) findForwardJumps() {
	clear(b.forward)
	var frames []int          // per open frame: its dispatch loop, or -1
	var loops []*dispatchLoop // open dispatch loops, innermost last
	for i := range b.instrs {
		in := &b.instrs[i]
		switch in.Op {
		case wasmbin.OpBlock, wasmbin.OpIf:
			frames = append(frames, -1)
		case wasmbin.OpLoop:
			d, ok := b.dispatchAt(i)
			if !ok {
				frames = append(frames, -1)
				break
			}
			d.frame = len(frames)
			frames = append(frames, len(loops))
			loops = append(loops, d)
		case wasmbin.OpEnd:
			closing := len(frames) - 1
			if closing < 0 {
				break // the function's end
			}
			frames = frames[:closing]
			if n := len(loops); n > 0 {
				d := loops[n-1]
				switch closing {
				case d.frame:
					loops = loops[:n-1]
				case d.frame + d.ladder - d.ends:
					d.ends++
				}
			}
		case wasmbin.OpBr:
			target := len(frames) - 1 - int(in.Index)
			if target < 0 || frames[target] < 0 {
				break
			}
			if b.jumpsForward(i, loops[frames[target]]) {
				b.forward[i] = true
			}
		}
	}
}

// dispatchAt reports whether the loop at instruction i starts a dispatch
// loop, and its ladder.
func (b *bodyRewriter) dispatchAt(i int) (*dispatchLoop, bool) {
	n := 0
	for i+1+n < len(b.instrs) && b.instrs[i+1+n].Op == wasmbin.OpBlock && b.instrs[i+1+n].BlockType == blockEmptyType {
		n++
	}
	if n == 0 || i+n+2 >= len(b.instrs) {
		return nil, false
	}
	get, table := &b.instrs[i+n+1], &b.instrs[i+n+2]
	if get.Op != wasmbin.OpLocalGet || table.Op != wasmbin.OpBrTable {
		return nil, false
	}
	for _, l := range table.Labels {
		if uint64(l) >= uint64(n) {
			return nil, false
		}
	}
	return &dispatchLoop{ladder: n, state: get.Index, table: table.Labels}, true
}

// jumpsForward reports whether the br at instruction i sets d's state to
// a constant whose region comes after the one the br is in.
func (b *bodyRewriter) jumpsForward(i int, d *dispatchLoop) bool {
	if i < 2 {
		return false
	}
	set, k := &b.instrs[i-1], &b.instrs[i-2]
	if set.Op != wasmbin.OpLocalSet || set.Index != d.state || k.Op != wasmbin.OpI32Const {
		return false
	}
	// A state past the table's end, or negative, takes the default label,
	// which is last.
	target := d.table[len(d.table)-1]
	if k.Index < uint32(len(d.table)) {
		target = d.table[k.Index]
	}
	return int(target) > d.ends-1
}
