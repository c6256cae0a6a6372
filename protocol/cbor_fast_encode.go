package protocol

import (
	"cmp"
	"encoding/binary"
	"math"
	"slices"
	"strings"

	"github.com/x448/float16"
)

// The fast encoder: an encoder for the two top-level messages that writes
// exactly the bytes cborEnc (fxamacker/cbor with CoreDetEncOptions) writes
// for them, without reflection. Core Deterministic Encoding sorts map
// keys, struct fields included, bytewise by their encoding, which for text
// keys means shorter first, then bytewise. The code for each struct, its
// fields in that order, is generated from the structs (cbor_fast_gen.go,
// internal/cborgen); what it calls, the same for every field, is below. A
// value outside the JSON data model is handed to cborEnc. FuzzDecodeCBOR
// and TestFastEncoderMatchesCBOREncoder hold the bytes equal to cborEnc's.

// marshalCBOR encodes v deterministically.
func marshalCBOR(v any) ([]byte, error) {
	var w cborWriter
	if !w.writeMessage(v) {
		return cborEnc.Marshal(v)
	}
	if w.err != nil {
		return nil, w.err
	}
	return w.buf, nil
}

// frameSizeHint guesses the size of a frame with n actions or results, so
// that a typical frame is written without growing the buffer: growing it
// costs more than the whole rest of the encoding.
func frameSizeHint(n int) int { return 256 + 320*n }

// cborWriter appends CBOR to buf. The first error, which only cborEnc can
// return, sticks; later writes still append but the result is dropped.
type cborWriter struct {
	buf []byte
	err error
}

// beginStruct reserves the one-byte head of a struct's map: the generator
// refuses a struct of 24 fields or more, so the count fits in it.
// endStruct writes the count of the fields that were not omitted.
func (w *cborWriter) beginStruct() int {
	w.buf = append(w.buf, 0)
	return len(w.buf) - 1
}

func (w *cborWriter) endStruct(at, fields int) {
	w.buf[at] = majorMap<<5 | byte(fields)
}

// value writes a free-form value. Types beyond the JSON data model's and
// the common integer types go to cborEnc.
func (w *cborWriter) value(v any) {
	switch v := v.(type) {
	case nil:
		w.buf = append(w.buf, cborNull)
	case bool:
		if v {
			w.buf = append(w.buf, cborTrue)
		} else {
			w.buf = append(w.buf, cborFalse)
		}
	case string:
		w.text(v)
	case int64:
		w.int(v)
	case int:
		w.int(int64(v))
	case uint64:
		w.head(majorUint, v)
	case float64:
		w.float(v)
	case map[string]any:
		if v == nil {
			w.buf = append(w.buf, cborNull)
			return
		}
		w.freeMap(v)
	case []any:
		if v == nil {
			w.buf = append(w.buf, cborNull)
			return
		}
		w.head(majorArray, uint64(len(v)))
		for _, e := range v {
			w.value(e)
		}
	case Preencoded:
		w.preencoded(v)
	default:
		w.fallback(v)
	}
}

// entry is one pair of a free-form map, for sorting.
type entry struct {
	key string
	val any
}

// freeMap writes a free-form map with its keys in Core Deterministic order.
func (w *cborWriter) freeMap(m map[string]any) {
	w.head(majorMap, uint64(len(m)))
	var small [8]entry
	entries := small[:0]
	for k, v := range m {
		entries = append(entries, entry{k, v})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := cmp.Compare(len(a.key), len(b.key)); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	for _, e := range entries {
		w.text(e.key)
		w.value(e.val)
	}
}

// Preencoded is a value that holds its own CBOR, as this package encodes
// it (the server encodes a parameter once for every frame it goes in):
// the fast encoder copies those bytes, where cborEnc, which calls
// MarshalCBOR, would check them first.
type Preencoded interface {
	MarshalCBOR() ([]byte, error)
	// Preencoded marks the bytes MarshalCBOR gives as this package's
	// own encoding, safe to copy unchecked.
	Preencoded()
}

func (w *cborWriter) preencoded(v Preencoded) {
	b, err := v.MarshalCBOR()
	if err != nil && w.err == nil {
		w.err = err
	}
	w.buf = append(w.buf, b...)
}

// fallback has cborEnc write v, a value the fast encoder does not know.
func (w *cborWriter) fallback(v any) {
	b, err := cborEnc.Marshal(v)
	if err != nil && w.err == nil {
		w.err = err
	}
	w.buf = append(w.buf, b...)
}

// head writes a data item's initial byte and argument in the shortest
// form.
func (w *cborWriter) head(major byte, arg uint64) {
	ib := major << 5
	switch {
	case arg < 24:
		w.buf = append(w.buf, ib|byte(arg))
	case arg <= math.MaxUint8:
		w.buf = append(w.buf, ib|24, byte(arg))
	case arg <= math.MaxUint16:
		w.buf = binary.BigEndian.AppendUint16(append(w.buf, ib|25), uint16(arg))
	case arg <= math.MaxUint32:
		w.buf = binary.BigEndian.AppendUint32(append(w.buf, ib|26), uint32(arg))
	default:
		w.buf = binary.BigEndian.AppendUint64(append(w.buf, ib|27), arg)
	}
}

func (w *cborWriter) text(s string) {
	w.head(majorText, uint64(len(s)))
	w.buf = append(w.buf, s...)
}

func (w *cborWriter) int(i int64) {
	if i < 0 {
		w.head(majorNegInt, uint64(-1-i))
		return
	}
	w.head(majorUint, uint64(i))
}

// float writes f in the shortest of half, single and double precision that
// keeps its value, as ShortestFloat16 does. NaN and infinities, which the
// wire refuses, are left to cborEnc.
func (w *cborWriter) float(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		w.fallback(f)
		return
	}
	f32 := float32(f)
	switch {
	case float64(f32) != f:
		w.buf = binary.BigEndian.AppendUint64(append(w.buf, majorSimple<<5|aiFloat64), math.Float64bits(f))
	case float16.Fromfloat32(f32).Float32() == f32:
		w.buf = binary.BigEndian.AppendUint16(append(w.buf, majorSimple<<5|aiFloat16), float16.Fromfloat32(f32).Bits())
	default:
		w.buf = binary.BigEndian.AppendUint32(append(w.buf, majorSimple<<5|aiFloat32), math.Float32bits(f32))
	}
}
