package wasmbin

import "fmt"

// AppendConstExpr copies the constant expression at the reader's position
// to b, passing each ref.func index through remap. Only the constant
// instructions of the accepted feature set may appear.
func AppendConstExpr(b []byte, r *Reader, remap func(uint32) uint32) ([]byte, error) {
	var in Instr
	for {
		if err := r.ReadInstr(&in); err != nil {
			return nil, fmt.Errorf("constant expression: %w", err)
		}
		switch in.Op {
		case OpEnd:
			return append(b, byte(OpEnd)), nil
		case OpRefFunc:
			b = append(b, byte(OpRefFunc))
			b = AppendU32(b, remap(in.Index))
		case OpI32Const, OpI64Const, OpF32Const, OpF64Const, OpRefNull, OpGlobalGet:
			b = append(b, r.Slice(in.Start, in.End)...)
		default:
			return nil, fmt.Errorf("constant expression: opcode %s is not supported", in.Op)
		}
	}
}
