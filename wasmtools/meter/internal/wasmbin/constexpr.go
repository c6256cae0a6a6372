package wasmbin

import "fmt"

// AppendConstExpr copies the constant expression at the reader's position
// to b, passing each ref.func index through remap, which fails for an
// index that names no function. Only the constant instructions of the
// accepted feature set may appear.
func AppendConstExpr(b []byte, r *Reader, remap func(uint32) (uint32, error)) ([]byte, error) {
	var in Instr
	for {
		if err := r.ReadInstr(&in); err != nil {
			return nil, fmt.Errorf("constant expression: %w", err)
		}
		switch in.Op {
		case OpEnd:
			return append(b, byte(OpEnd)), nil
		case OpRefFunc:
			f, err := remap(in.Index)
			if err != nil {
				return nil, fmt.Errorf("constant expression: ref.func: %w", err)
			}
			b = AppendU32(append(b, byte(OpRefFunc)), f)
		case OpI32Const, OpI64Const, OpF32Const, OpF64Const, OpRefNull, OpGlobalGet:
			b = append(b, r.Slice(in.Start, in.End)...)
		default:
			return nil, fmt.Errorf("constant expression: opcode %s is not supported", in.Op)
		}
	}
}
