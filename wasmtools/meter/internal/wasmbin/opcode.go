package wasmbin

import "fmt"

// Opcode identifies an instruction. Single-byte opcodes are their byte;
// prefixed ones are the prefix shifted left by 24 ORed with the sub-opcode.
type Opcode uint32

// Prefixed builds the Opcode of a prefixed instruction.
func Prefixed(prefix byte, sub uint32) Opcode { return Opcode(prefix)<<24 | Opcode(sub) }

// Opcodes the rewriter treats specially. The rest are only named in the
// table below.
const (
	OpUnreachable  Opcode = 0x00
	OpBlock        Opcode = 0x02
	OpLoop         Opcode = 0x03
	OpIf           Opcode = 0x04
	OpElse         Opcode = 0x05
	OpEnd          Opcode = 0x0b
	OpBr           Opcode = 0x0c
	OpBrIf         Opcode = 0x0d
	OpBrTable      Opcode = 0x0e
	OpReturn       Opcode = 0x0f
	OpCall         Opcode = 0x10
	OpCallIndirect Opcode = 0x11
	OpReturnCall   Opcode = 0x12 // emitted only: the rewriter refuses it in input
	OpLocalGet     Opcode = 0x20
	OpLocalSet     Opcode = 0x21
	OpLocalTee     Opcode = 0x22
	OpGlobalGet    Opcode = 0x23
	OpGlobalSet    Opcode = 0x24
	OpTableGet     Opcode = 0x25
	OpTableSet     Opcode = 0x26
	OpI32Load      Opcode = 0x28 // the first load
	OpI64Store32   Opcode = 0x3e // the last store
	OpMemoryGrow   Opcode = 0x40
	OpI32Const     Opcode = 0x41
	OpI64Const     Opcode = 0x42
	OpF32Const     Opcode = 0x43
	OpF64Const     Opcode = 0x44
	OpSelect       Opcode = 0x1b
	OpI32Eqz       Opcode = 0x45
	OpI32Ne        Opcode = 0x47
	OpI32LtS       Opcode = 0x48
	OpI32LtU       Opcode = 0x49
	OpI32GtS       Opcode = 0x4a
	OpI64Eqz       Opcode = 0x50
	OpI64LtS       Opcode = 0x53
	OpI64GtS       Opcode = 0x55
	OpI64GtU       Opcode = 0x56
	OpI64GeS       Opcode = 0x59
	OpI32Add       Opcode = 0x6a
	OpI32And       Opcode = 0x71
	OpI32DivS      Opcode = 0x6d
	OpI32RemU      Opcode = 0x70
	OpI64Add       Opcode = 0x7c
	OpI64Sub       Opcode = 0x7d
	OpI64Mul       Opcode = 0x7e
	OpI64DivS      Opcode = 0x7f
	OpI64DivU      Opcode = 0x80
	OpI64RemU      Opcode = 0x82
	OpI64And       Opcode = 0x83
	OpI64Shl       Opcode = 0x86
	OpI64ShrU      Opcode = 0x88
	OpI32TruncF32S Opcode = 0xa8
	OpI32TruncF64U Opcode = 0xab
	OpI64ExtendS   Opcode = 0xac
	OpI64ExtendU   Opcode = 0xad
	OpI64TruncF32S Opcode = 0xae
	OpI64TruncF64U Opcode = 0xb1
	OpRefNull      Opcode = 0xd0
	OpRefFunc      Opcode = 0xd2

	OpMemoryInit = Opcode(0xfc)<<24 | 8
	OpMemoryCopy = Opcode(0xfc)<<24 | 10
	OpMemoryFill = Opcode(0xfc)<<24 | 11
	OpTableInit  = Opcode(0xfc)<<24 | 12
	OpTableCopy  = Opcode(0xfc)<<24 | 14
	OpTableGrow  = Opcode(0xfc)<<24 | 15
	OpTableSize  = Opcode(0xfc)<<24 | 16
	OpTableFill  = Opcode(0xfc)<<24 | 17
)

// imm says which immediates follow an opcode.
type imm uint8

const (
	immNone      imm = iota
	immBlockType     // s33 block type
	immIndex         // one u32: label, function, local, global, table, type, data or element index
	immTwoIndex      // two u32s: call_indirect, table.init, table.copy
	immBrTable       // vec(u32) u32
	immMemArg        // u32 alignment, u32 offset
	immMemIndex      // u32 memory index (memory.size, memory.grow, memory.fill)
	immDataMem       // u32 data index, u32 memory index (memory.init)
	immTwoMem        // two u32 memory indices (memory.copy)
	immI32           // s32
	immI64           // s64
	immF32           // 4 bytes
	immF64           // 8 bytes
	immRefType       // one byte
	immValTypes      // vec(valtype), typed select
)

type opInfo struct {
	name string
	imm  imm
}

// ops lists every instruction the rewriter accepts: the MVP plus
// sign-extension, non-trapping float-to-int, bulk memory, reference types
// and multi-value (which adds no opcodes). Anything else is rejected.
var ops = buildOpTable()

func buildOpTable() map[Opcode]opInfo {
	t := map[Opcode]opInfo{
		0x00: {"unreachable", immNone}, 0x01: {"nop", immNone},
		0x02: {"block", immBlockType}, 0x03: {"loop", immBlockType}, 0x04: {"if", immBlockType},
		0x05: {"else", immNone}, 0x0b: {"end", immNone},
		0x0c: {"br", immIndex}, 0x0d: {"br_if", immIndex}, 0x0e: {"br_table", immBrTable},
		0x0f: {"return", immNone}, 0x10: {"call", immIndex}, 0x11: {"call_indirect", immTwoIndex},
		0x1a: {"drop", immNone}, 0x1b: {"select", immNone}, 0x1c: {"select", immValTypes},
		0x20: {"local.get", immIndex}, 0x21: {"local.set", immIndex}, 0x22: {"local.tee", immIndex},
		0x23: {"global.get", immIndex}, 0x24: {"global.set", immIndex},
		0x25: {"table.get", immIndex}, 0x26: {"table.set", immIndex},
		0x3f: {"memory.size", immMemIndex}, 0x40: {"memory.grow", immMemIndex},
		0x41: {"i32.const", immI32}, 0x42: {"i64.const", immI64},
		0x43: {"f32.const", immF32}, 0x44: {"f64.const", immF64},
		0xd0: {"ref.null", immRefType}, 0xd1: {"ref.is_null", immNone}, 0xd2: {"ref.func", immIndex},
	}
	for op := OpI32Load; op <= OpI64Store32; op++ {
		t[op] = opInfo{"load/store", immMemArg}
	}
	// Numeric instructions without immediates: MVP 0x45-0xbf, sign
	// extension 0xc0-0xc4.
	for op := Opcode(0x45); op <= 0xc4; op++ {
		t[op] = opInfo{"numeric", immNone}
	}
	for sub := uint32(0); sub <= 7; sub++ {
		t[Prefixed(0xfc, sub)] = opInfo{"trunc_sat", immNone}
	}
	fc := map[uint32]opInfo{
		8: {"memory.init", immDataMem}, 9: {"data.drop", immIndex},
		10: {"memory.copy", immTwoMem}, 11: {"memory.fill", immMemIndex},
		12: {"table.init", immTwoIndex}, 13: {"elem.drop", immIndex},
		14: {"table.copy", immTwoIndex}, 15: {"table.grow", immIndex},
		16: {"table.size", immIndex}, 17: {"table.fill", immIndex},
	}
	for sub, info := range fc {
		t[Prefixed(0xfc, sub)] = info
	}
	return t
}

func (op Opcode) String() string {
	if op>>24 != 0 {
		return fmt.Sprintf("0x%02x %d", byte(op>>24), uint32(op&0xffffff))
	}
	return fmt.Sprintf("0x%02x", byte(op))
}

// UnsupportedError reports an instruction outside the accepted set.
type UnsupportedError struct {
	Op     Opcode
	Offset int // within the function body
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("opcode %s (%s) at body offset %d is not supported", e.Op, proposalOf(e.Op), e.Offset)
}

// proposalOf names the proposal an unsupported opcode most likely comes
// from, so that the error tells the module's author what to turn off.
func proposalOf(op Opcode) string {
	switch {
	case op>>24 == 0xfd:
		return "SIMD"
	case op>>24 == 0xfe:
		return "threads"
	case op>>24 == 0xfb:
		return "GC"
	case op>>24 == 0xfc:
		return "unknown 0xfc-prefixed instruction"
	case op == 0x12 || op == 0x13:
		return "tail calls"
	case op == 0x14 || op == 0x15 || (op >= 0xd3 && op <= 0xd6):
		return "typed function references"
	case (op >= 0x06 && op <= 0x0a) || op == 0x18 || op == 0x19 || op == 0x1f:
		return "exception handling"
	default:
		return "unknown instruction"
	}
}
