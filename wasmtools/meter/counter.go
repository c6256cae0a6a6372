package meter

// The counter is one i64 that carries both the fuel left in the current
// slice and the call depth:
//
//	counter = fuel<<depthBits | depth
//
// Packing them lets one value travel between caller and callee, in a
// register between twins and in one global at the host boundary. Paying c
// units subtracts c<<depthBits, which leaves the depth alone; entering a
// counted function adds one.
//
// fuel is signed and goes negative when a segment is paid for with too
// little left; the counter then compares below fuelUnit, which is the
// check every checkpoint makes ("no fuel left" means counter < fuelUnit).
const (
	depthBits = 16
	depthMask = 1<<depthBits - 1
	fuelUnit  = 1 << depthBits

	// maxSlice keeps fuel<<depthBits, with any one charge subtracted from
	// it, inside an int64. The largest charge is memory.grow of 2^32-1
	// pages, about 2^42 units.
	maxSlice = 1 << 45
)
