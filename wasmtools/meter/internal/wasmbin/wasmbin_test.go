package wasmbin

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLEB128RoundTrips(t *testing.T) {
	for _, v := range []uint32{0, 1, 63, 64, 127, 128, 300, 1<<21 - 1, 1 << 28, math.MaxUint32} {
		got, err := NewReader(AppendU32(nil, v)).U32()
		require.NoError(t, err)
		assert.Equal(t, v, got)
	}
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, 1 << 40, math.MinInt64, math.MaxInt64} {
		got, err := NewReader(AppendS64(nil, v)).S64()
		require.NoError(t, err)
		assert.Equal(t, v, got)
	}
	for _, v := range []int32{0, -1, math.MinInt32, math.MaxInt32} {
		got, err := NewReader(AppendS64(nil, int64(v))).S32()
		require.NoError(t, err)
		assert.Equal(t, v, got)
	}
}

func TestLEB128RejectsOverflowAndTruncation(t *testing.T) {
	_, err := NewReader([]byte{0xff, 0xff, 0xff, 0xff, 0x1f}).U32() // 35 bits
	assert.ErrorContains(t, err, "overflows 32 bits")
	_, err = NewReader([]byte{0x80, 0x80}).U32()
	assert.ErrorIs(t, err, ErrTruncated)
	_, err = NewReader([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}).S32()
	assert.ErrorContains(t, err, "overflows 32 bits")
}

func TestReadSectionsSplitsAndReassembles(t *testing.T) {
	module := AppendModuleHeader(nil)
	module = AppendSection(module, Section{ID: SectionType, Payload: []byte{0}})
	module = AppendSection(module, Section{ID: SectionCustom, Name: "note", Payload: []byte("hi")})
	sections, err := ReadSections(module)
	require.NoError(t, err)
	require.Len(t, sections, 2)
	assert.Equal(t, Section{ID: SectionCustom, Name: "note", Payload: []byte("hi")}, sections[1])

	again := AppendModuleHeader(nil)
	for _, s := range sections {
		again = AppendSection(again, s)
	}
	assert.Equal(t, module, again)

	_, err = ReadSections([]byte("\x00asm\x02\x00\x00\x00"))
	assert.ErrorContains(t, err, "not a WebAssembly 1.0 module")
}

func TestReadInstrKeepsTheImmediatesTheRewriterUses(t *testing.T) {
	// br_table 1 0 2 (default), call_indirect type 5 table 1, i32.const -2, block (type 3)
	code := []byte{0x0e, 2, 1, 0, 2, 0x11, 5, 1, 0x41, 0x7e, 0x02, 3}
	r := NewReader(code)
	var in Instr
	require.NoError(t, r.ReadInstr(&in))
	assert.Equal(t, OpBrTable, in.Op)
	assert.Equal(t, []uint32{1, 0, 2}, in.Labels)
	require.NoError(t, r.ReadInstr(&in))
	assert.Equal(t, Instr{Op: OpCallIndirect, Start: 5, End: 8, Index: 5, Index2: 1, Labels: in.Labels[:0]}, in)
	require.NoError(t, r.ReadInstr(&in))
	assert.Equal(t, uint32(0xfffffffe), in.Index)
	require.NoError(t, r.ReadInstr(&in))
	assert.Equal(t, int64(3), in.BlockType)
	assert.Zero(t, r.Len())
}

func TestReadInstrRejectsWhatTheCostModelDoesNotKnow(t *testing.T) {
	for code, proposal := range map[string]string{
		"\xfd\x0c":     "SIMD",
		"\xfe\x00":     "threads",
		"\x12\x00":     "tail calls",
		"\x1f\x40":     "exception handling",
		"\xd4\x00":     "typed function references",
		"\xfc\x12\x00": "unknown 0xfc-prefixed instruction",
	} {
		var in Instr
		err := NewReader([]byte(code)).ReadInstr(&in)
		var unsupported *UnsupportedError
		require.True(t, errors.As(err, &unsupported), "% x", code)
		assert.Contains(t, err.Error(), "("+proposal+")")
	}
	var in Instr
	err := NewReader([]byte{0x28, 0x40, 0, 0}).ReadInstr(&in) // memarg with a memory index
	assert.ErrorContains(t, err, "multi-memory")
}

func TestAppendConstExprRemapsRefFunc(t *testing.T) {
	expr := []byte{0xd2, 7, 0x0b}
	out, err := AppendConstExpr(nil, NewReader(expr), func(f uint32) (uint32, error) { return f + 100, nil })
	require.NoError(t, err)
	assert.Equal(t, []byte{0xd2, 107, 0x0b}, out)

	_, err = AppendConstExpr(nil, NewReader([]byte{0x41, 1, 0x41, 2, 0x6a, 0x0b}), nil) // extended const
	assert.ErrorContains(t, err, "not supported")
}

func TestCountRefusesVectorsThatCannotFit(t *testing.T) {
	n, err := NewReader([]byte{2, 0xaa, 0xbb, 0xcc, 0xdd}).Count(2)
	require.NoError(t, err)
	assert.Equal(t, uint32(2), n)
	_, err = NewReader([]byte{3, 0xaa, 0xbb, 0xcc, 0xdd}).Count(2)
	assert.ErrorIs(t, err, ErrTruncated)
	_, err = NewReader([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}).Count(1)
	assert.EqualError(t, err, "count 4294967295 at offset 0: 0 bytes left: unexpected end of input")
}

func TestAppendConstExprPassesOnRemapErrors(t *testing.T) {
	_, err := AppendConstExpr(nil, NewReader([]byte{0xd2, 7, 0x0b}), func(f uint32) (uint32, error) {
		return 0, errors.New("no such function")
	})
	assert.EqualError(t, err, "constant expression: ref.func: no such function")
}
