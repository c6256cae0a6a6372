// Package wasmbin reads and writes the pieces of the WebAssembly binary
// format that the fuel rewriter needs: LEB128 integers, sections,
// instructions and constant expressions.
//
// It decodes only as much as rewriting requires and leaves everything else
// as byte ranges of the input, so untouched parts can be copied verbatim.
// It assumes its input has already been validated (by wazero), and so
// reports malformed input as an error but does not re-check typing.
package wasmbin

import (
	"errors"
	"fmt"
)

// ErrTruncated is returned when the input ends in the middle of a value.
var ErrTruncated = errors.New("unexpected end of input")

// Reader decodes values from a byte slice, tracking its position so that
// callers can slice out the bytes a value occupied.
type Reader struct {
	buf []byte
	pos int
}

// NewReader returns a Reader positioned at the start of buf.
func NewReader(buf []byte) *Reader { return &Reader{buf: buf} }

// Pos is the offset of the next unread byte.
func (r *Reader) Pos() int { return r.pos }

// Len is the number of unread bytes.
func (r *Reader) Len() int { return len(r.buf) - r.pos }

// Slice returns the input bytes between two positions.
func (r *Reader) Slice(from, to int) []byte { return r.buf[from:to] }

// Rest returns the unread bytes without consuming them.
func (r *Reader) Rest() []byte { return r.buf[r.pos:] }

// Byte reads one byte.
func (r *Reader) Byte() (byte, error) {
	if r.pos >= len(r.buf) {
		return 0, fmt.Errorf("byte at offset %d: %w", r.pos, ErrTruncated)
	}
	b := r.buf[r.pos]
	r.pos++
	return b, nil
}

// Bytes reads n raw bytes.
func (r *Reader) Bytes(n int) ([]byte, error) {
	if n < 0 || n > r.Len() {
		return nil, fmt.Errorf("%d bytes at offset %d: %w", n, r.pos, ErrTruncated)
	}
	b := r.buf[r.pos : r.pos+n]
	r.pos += n
	return b, nil
}

// U32 reads an unsigned LEB128 value of at most 32 bits.
func (r *Reader) U32() (uint32, error) {
	v, err := r.uleb(32)
	return uint32(v), err
}

// S32 reads a signed LEB128 value of at most 32 bits.
func (r *Reader) S32() (int32, error) {
	v, err := r.sleb(32)
	return int32(v), err
}

// S33 reads a signed LEB128 value of at most 33 bits, the encoding of
// block types.
func (r *Reader) S33() (int64, error) { return r.sleb(33) }

// S64 reads a signed LEB128 value of at most 64 bits.
func (r *Reader) S64() (int64, error) { return r.sleb(64) }

// Count reads the length of a vector whose entries take at least
// minSize bytes each, and checks that they fit in what is left: a count
// read from a module must never size an allocation on its own.
func (r *Reader) Count(minSize int) (uint32, error) {
	at := r.pos
	n, err := r.U32()
	if err != nil {
		return 0, err
	}
	if uint64(n)*uint64(minSize) > uint64(r.Len()) {
		return 0, fmt.Errorf("count %d at offset %d: %d bytes left: %w", n, at, r.Len(), ErrTruncated)
	}
	return n, nil
}

// Name reads a length-prefixed UTF-8 name.
func (r *Reader) Name() (string, error) {
	n, err := r.U32()
	if err != nil {
		return "", err
	}
	b, err := r.Bytes(int(n))
	return string(b), err
}

func (r *Reader) uleb(bits uint) (uint64, error) {
	start := r.pos
	var v uint64
	for shift := uint(0); ; shift += 7 {
		b, err := r.Byte()
		if err != nil {
			return 0, err
		}
		if shift >= bits || (bits-shift < 7 && b&0x7f>>(bits-shift) != 0) {
			return 0, fmt.Errorf("LEB128 at offset %d overflows %d bits", start, bits)
		}
		v |= uint64(b&0x7f) << shift
		if b&0x80 == 0 {
			return v, nil
		}
	}
}

func (r *Reader) sleb(bits uint) (int64, error) {
	start := r.pos
	var v int64
	var shift uint
	for {
		b, err := r.Byte()
		if err != nil {
			return 0, err
		}
		if shift >= bits {
			return 0, fmt.Errorf("LEB128 at offset %d overflows %d bits", start, bits)
		}
		v |= int64(b&0x7f) << shift
		shift += 7
		if b&0x80 == 0 {
			if shift < 64 && b&0x40 != 0 {
				v |= -1 << shift
			}
			return v, nil
		}
	}
}

// AppendU32 appends v as unsigned LEB128.
func AppendU32(b []byte, v uint32) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// AppendS64 appends v as signed LEB128 (also valid for 32-bit immediates
// whose value fits).
func AppendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// AppendName appends a length-prefixed name.
func AppendName(b []byte, s string) []byte {
	b = AppendU32(b, uint32(len(s)))
	return append(b, s...)
}
