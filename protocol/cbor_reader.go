package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/x448/float16"
)

// CBOR major types (RFC 8949 §3.1).
const (
	majorUint byte = iota
	majorNegInt
	majorBytes
	majorText
	majorArray
	majorMap
	majorTag
	majorSimple
)

// The additional information of major type 7 that JSON has: false, true,
// null, and the three float widths.
const (
	aiFalse   = 20
	aiTrue    = 21
	aiNull    = 22
	aiFloat16 = 25
	aiFloat32 = 26
	aiFloat64 = 27
)

// The simple values JSON has, as whole data items.
const (
	cborFalse = majorSimple<<5 | aiFalse
	cborTrue  = majorSimple<<5 | aiTrue
	cborNull  = majorSimple<<5 | aiNull
)

// cborReader reads the data items of one frame. Every read is
// bounds-checked and every limit of the strict decoder is enforced as the
// reader goes, so it is safe on any bytes: the fast decoder runs it with no
// well-formedness pass before it.
type cborReader struct {
	data  []byte
	off   int
	depth int // arrays and maps entered, the frame itself being 1
}

// head reads the initial byte and argument of the next data item. It
// refuses truncated data, indefinite lengths and the reserved additional
// information 28–30.
func (r *cborReader) head() (major, ai byte, arg uint64, ok bool) {
	if r.off >= len(r.data) {
		return 0, 0, 0, false
	}
	b := r.data[r.off]
	r.off++
	major, ai = b>>5, b&0x1f
	if ai < 24 {
		return major, ai, uint64(ai), true
	}
	if ai > aiFloat64 {
		return 0, 0, 0, false
	}
	size := 1 << (ai - 24)
	if len(r.data)-r.off < size {
		return 0, 0, 0, false
	}
	p := r.data[r.off : r.off+size]
	r.off += size
	switch size {
	case 1:
		arg = uint64(p[0])
	case 2:
		arg = uint64(binary.BigEndian.Uint16(p))
	case 4:
		arg = uint64(binary.BigEndian.Uint32(p))
	default:
		arg = binary.BigEndian.Uint64(p)
	}
	return major, ai, arg, true
}

// null consumes a null if one is next.
func (r *cborReader) null() bool {
	if r.off < len(r.data) && r.data[r.off] == cborNull {
		r.off++
		return true
	}
	return false
}

// enter starts an array or map of n items (a map's pairs count twice),
// checking the depth and size limits. A length that the rest of the frame
// cannot hold is refused before anything is allocated for it.
func (r *cborReader) enter(major byte, n uint64) (int, bool) {
	limit, items := uint64(MaxArrayElements), n
	if major == majorMap {
		limit, items = MaxMapPairs, 2*n
	}
	r.depth++
	if r.depth > MaxDepth || n > limit || items > uint64(len(r.data)-r.off) {
		return 0, false
	}
	return int(n), true
}

func (r *cborReader) leave() { r.depth-- }

// take takes the n bytes of a string's content. They alias the frame.
func (r *cborReader) take(n uint64) ([]byte, bool) {
	if n > uint64(len(r.data)-r.off) {
		return nil, false
	}
	b := r.data[r.off : r.off+int(n)]
	r.off += int(n)
	return b, true
}

// text takes the n bytes of a text string, which must be valid UTF-8.
func (r *cborReader) text(n uint64) ([]byte, bool) {
	b, ok := r.take(n)
	return b, ok && utf8.Valid(b)
}

// float reads the argument of a float head as float64, the way the strict
// decoder does, and refuses NaN and infinities.
func decodeFloat(ai byte, arg uint64) (float64, bool) {
	var f float64
	switch ai {
	case aiFloat16:
		f = float64(float16.Frombits(uint16(arg)).Float32())
	case aiFloat32:
		f = float64(math.Float32frombits(uint32(arg)))
	case aiFloat64:
		f = math.Float64frombits(arg)
	default:
		return 0, false
	}
	return f, !math.IsNaN(f) && !math.IsInf(f, 0)
}

var (
	errNotWellFormed = errors.New("not well-formed CBOR")
	errInvalidUTF8   = errors.New("invalid UTF-8")
)

// checkKeysAndText enforces, over the whole frame, the rules the CBOR
// decoder applies only to the fields it decodes: every map key is a text
// string and unique, and every text string is valid UTF-8. Without it, an
// unknown field could carry what a known one may not, and a CBOR frame
// could pass where the same frame in JSON is refused.
func checkKeysAndText(data []byte) error {
	r := cborReader{data: data}
	return r.check()
}

// check reads one data item, refusing anything outside the JSON data model
// except byte strings and integers beyond int64, which only a field typed
// for them can take and the strict decoder already judged.
func (r *cborReader) check() error {
	major, ai, arg, ok := r.head()
	if !ok {
		return errNotWellFormed
	}
	switch major {
	case majorUint, majorNegInt:
		return nil
	case majorBytes, majorText:
		b, ok := r.take(arg)
		if !ok {
			return errNotWellFormed
		}
		if major == majorText && !utf8.Valid(b) {
			return errInvalidUTF8
		}
		return nil
	case majorArray, majorMap:
		return r.checkCollection(major, arg)
	case majorSimple:
		if _, ok := decodeFloat(ai, arg); ok || ai == aiFalse || ai == aiTrue || ai == aiNull {
			return nil
		}
	}
	return errNotWellFormed
}

func (r *cborReader) checkCollection(major byte, arg uint64) error {
	n, ok := r.enter(major, arg)
	if !ok {
		return errNotWellFormed
	}
	defer r.leave()
	if major == majorArray {
		for range n {
			if err := r.check(); err != nil {
				return err
			}
		}
		return nil
	}
	seen := make(map[string]struct{}, n)
	for range n {
		key, err := r.checkKey()
		if err != nil {
			return err
		}
		if _, dup := seen[string(key)]; dup {
			return fmt.Errorf("duplicate key %q", clip(string(key)))
		}
		seen[string(key)] = struct{}{}
		if err := r.check(); err != nil {
			return err
		}
	}
	return nil
}

// checkKey reads a map key, which must be text.
func (r *cborReader) checkKey() ([]byte, error) {
	major, _, arg, ok := r.head()
	switch {
	case !ok:
		return nil, errNotWellFormed
	case major != majorText:
		return nil, fmt.Errorf("map key: want a string, got %s", majorName(major))
	}
	key, ok := r.take(arg)
	if !ok {
		return nil, errNotWellFormed
	}
	if !utf8.Valid(key) {
		return nil, errInvalidUTF8
	}
	return key, nil
}

// majorName names a CBOR major type as JSON would.
func majorName(major byte) string {
	switch major {
	case majorUint, majorNegInt:
		return "an integer"
	case majorBytes:
		return "a byte string"
	case majorText:
		return "a string"
	case majorArray:
		return "an array"
	case majorMap:
		return "an object"
	case majorTag:
		return "a tag"
	}
	return "a boolean, null or float"
}
