package meter

import "github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"

// CostModelVersion names the cost model and the instrumentation scheme.
// Instrument's output depends only on its input, its Options and this
// version, so any cache of instrumented or compiled modules must put it in
// its key. It changes whenever a cost or the shape of the emitted code does.
const CostModelVersion = "fuel/4"

// Cost model, version 4 (versions 1 to 3 had the same costs; version 1's
// code did not store the counter where a trap could lose it, version
// 3's runs counted loops that fit in the slice unmetered, paid for up
// front, see counted.go, and version 4's snapshot form calls through
// dispatchers instead of a table, see directcalls.go):
//
//   - Every instruction costs 1, except the structural markers block, loop,
//     else and end, which emit no machine code and cost 0.
//   - memory.fill, memory.copy, memory.init, table.fill, table.copy,
//     table.init and table.grow cost 1 + n/64 (integer division), where n
//     is their length operand in bytes or elements.
//   - memory.grow costs 1 + 1024 per page requested: a page is 64 KiB, and
//     1024 is what filling it with memory.fill would cost.
//
// The dynamic part is charged, and the budget checked, before the
// instruction runs, so a failed or trapping operation is still paid for.
// Before anything that can trap, the counter is where the host reads it,
// so a call that traps reports the fuel it consumed, to the end of the
// segment that trapped.

// staticCost is the fuel one execution of op costs, prepaid with the rest
// of its straight-line segment.
func staticCost(op wasmbin.Opcode) int64 {
	switch op {
	case wasmbin.OpBlock, wasmbin.OpLoop, wasmbin.OpElse, wasmbin.OpEnd:
		return 0
	}
	return 1
}

// Shifts that turn a length operand into its dynamic cost.
const (
	bytesPerUnitShift = 6  // n/64 for bulk memory and table operations
	unitsPerPageShift = 10 // 1024 per page for memory.grow
)

// dynamicCost says how op's length operand, on top of the stack, scales
// into extra fuel: shifted right by shift, or left when grow is set.
// ok is false for instructions whose cost is static.
func dynamicCost(op wasmbin.Opcode) (shift uint8, grow, ok bool) {
	switch op {
	case wasmbin.OpMemoryGrow:
		return unitsPerPageShift, true, true
	case wasmbin.OpMemoryFill, wasmbin.OpMemoryCopy, wasmbin.OpMemoryInit,
		wasmbin.OpTableFill, wasmbin.OpTableCopy, wasmbin.OpTableInit, wasmbin.OpTableGrow:
		return bytesPerUnitShift, false, true
	}
	return 0, false, false
}
