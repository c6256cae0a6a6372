package meter

// The counter is one i64 that carries both the fuel left in the current
// slice and the call depth:
//
//	counter = fuel<<depthBits | depth
//
// Packing them lets one value travel between caller and callee, in a
// register between twins and in one global at the host boundary. Paying c
// units subtracts c<<depthBits, which leaves the depth alone; entering a
// counted function adds one, and its caller's payment after the call takes
// it off again.
//
// fuel is signed and goes negative when a segment is paid for with too
// little left, and so does the counter: every checkpoint tests counter < 0.
// Running out is overspending, not reaching zero, so that a slice cut to
// exactly what is left of the budget can be spent to the last unit.
const (
	depthBits = 16
	depthMask = 1<<depthBits - 1
	fuelUnit  = 1 << depthBits

	// maxSlice keeps fuel<<depthBits, with any one charge subtracted from
	// it, inside an int64. The largest charge is memory.grow of 2^32-1
	// pages, about 2^42 units.
	maxSlice = 1 << 45
)
