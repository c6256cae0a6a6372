package wasmbin

import "fmt"

// Instr is one decoded instruction. Only the immediates the rewriter
// acts on are kept; the rest stay in the input between Start and End.
type Instr struct {
	Op    Opcode
	Start int // offset of the opcode in the input
	End   int // offset just past the last immediate
	// Index is the first index immediate: the label of br and br_if, the
	// function of call and ref.func; or the value of i32.const. Zero for
	// other instructions.
	Index uint32
	// Index2 is the second index immediate of call_indirect (the table),
	// table.init and table.copy. Zero for other instructions.
	Index2 uint32
	// BlockType is the block type of block, loop and if: negative for the
	// one-byte encodings (-64 for none), else a type index.
	BlockType int64
	// Labels holds br_table's targets, the default last. It is reused by
	// the next call to ReadInstr.
	Labels []uint32
}

// ReadInstr decodes the instruction at the reader's position into in,
// reusing in.Labels' storage.
func (r *Reader) ReadInstr(in *Instr) error {
	in.Start = r.pos
	in.Index, in.Index2, in.BlockType = 0, 0, 0
	in.Labels = in.Labels[:0]
	op, err := r.opcode()
	if err != nil {
		return err
	}
	in.Op = op
	info, ok := ops[op]
	if !ok {
		return &UnsupportedError{Op: op, Offset: in.Start}
	}
	if err := r.immediates(info.imm, in); err != nil {
		return fmt.Errorf("%s at offset %d: %w", info.name, in.Start, err)
	}
	in.End = r.pos
	return nil
}

func (r *Reader) opcode() (Opcode, error) {
	b, err := r.Byte()
	if err != nil {
		return 0, err
	}
	switch b {
	case 0xfb, 0xfc, 0xfd, 0xfe:
		sub, err := r.U32()
		return Prefixed(b, sub), err
	}
	return Opcode(b), nil
}

func (r *Reader) immediates(kind imm, in *Instr) error {
	var err error
	switch kind {
	case immNone:
	case immBlockType:
		in.BlockType, err = r.S33()
	case immIndex:
		in.Index, err = r.U32()
	case immTwoIndex, immMemArg, immDataMem, immTwoMem:
		err = r.memArgOrPair(kind, in)
	case immBrTable:
		err = r.brTable(in)
	case immMemIndex:
		_, err = r.U32()
	case immI32:
		var v int32
		v, err = r.S32()
		in.Index = uint32(v)
	case immI64:
		_, err = r.S64()
	case immF32:
		_, err = r.Bytes(4)
	case immF64:
		_, err = r.Bytes(8)
	case immRefType:
		_, err = r.Byte()
	case immValTypes:
		err = r.valTypes()
	}
	return err
}

func (r *Reader) memArgOrPair(kind imm, in *Instr) error {
	first, err := r.U32()
	if err != nil {
		return err
	}
	if kind == immMemArg && first&0x40 != 0 {
		return fmt.Errorf("memarg names a memory index (multi-memory is not supported)")
	}
	in.Index = first
	in.Index2, err = r.U32()
	return err
}

func (r *Reader) brTable(in *Instr) error {
	n, err := r.Count(1)
	if err != nil {
		return err
	}
	for i := uint32(0); i <= n; i++ {
		l, err := r.U32()
		if err != nil {
			return err
		}
		in.Labels = append(in.Labels, l)
	}
	return nil
}

func (r *Reader) valTypes() error {
	n, err := r.U32()
	if err != nil {
		return err
	}
	_, err = r.Bytes(int(n))
	return err
}
