package protocol

import (
	"math"
	"unicode/utf8"
)

// The fast decoder: a single-pass CBOR decoder for the two top-level
// messages. It takes only what it can vouch for and gives up on
// anything else (a type mismatch, a byte string, a broken limit, a
// duplicate key, …) without saying why: the strict decoder then decodes the
// frame from the start and gives the reason, so every error a frame can
// get still comes from one place (see RATIONALE.md, "Two decoders, one
// judge"). Whatever it accepts must decode to exactly what the strict
// decoder makes of it; FuzzDecodeCBOR holds the two side by side.
//
// Every field is decoded into a fresh message, so null and absent both
// leave a field at its zero value, as the strict decoder leaves it.

// decodeFast decodes a CBOR frame into m, which must be zero, and reports
// whether it could. When it could not, m may be partly filled. The code
// for each struct of the model is generated (cbor_fast_gen.go); it calls
// the helpers below, one for each kind of field.
func decodeFast(data []byte, m Message) bool {
	r := cborReader{data: data}
	return r.readMessage(m) && r.off == len(data)
}

// fields decodes a map into a struct. field decodes the value of a key the
// struct has and returns the key's own bit; for a key the struct does not
// have it returns 0 and reads nothing, and fields checks and skips the
// value, as the strict decoder ignores unknown keys. A key that comes
// twice, known or not, fails the frame.
func (r *cborReader) fields(field func(key []byte) (bit uint32, ok bool)) bool {
	major, _, arg, ok := r.head()
	if !ok || major != majorMap {
		return false
	}
	n, ok := r.enter(major, arg)
	if !ok {
		return false
	}
	var (
		seen    uint32
		unknown map[string]struct{}
	)
	for range n {
		// A key is checked for UTF-8 only when it is unknown: a known
		// one equals a field's name, which is ASCII.
		major, _, arg, ok := r.head()
		if !ok || major != majorText {
			return false
		}
		key, ok := r.take(arg)
		if !ok {
			return false
		}
		bit, ok := field(key)
		switch {
		case !ok, seen&bit != 0:
			return false
		case bit == 0:
			if !r.skipUnknown(key, &unknown) {
				return false
			}
		}
		seen |= bit
	}
	r.leave()
	return true
}

// skipUnknown checks and skips the value of a key the struct does not
// have. The key must be valid UTF-8 and must not come twice either.
func (r *cborReader) skipUnknown(key []byte, seen *map[string]struct{}) bool {
	if !utf8.Valid(key) {
		return false
	}
	if *seen == nil {
		*seen = map[string]struct{}{}
	}
	if _, dup := (*seen)[string(key)]; dup {
		return false
	}
	(*seen)[string(key)] = struct{}{}
	return r.check() == nil
}

// key reads a map key, which must be valid UTF-8 text.
func (r *cborReader) key() ([]byte, bool) {
	major, _, arg, ok := r.head()
	if !ok || major != majorText {
		return nil, false
	}
	return r.text(arg)
}

// text decodes text or null into a string field.
func text[T ~string](r *cborReader, p *T) bool {
	if r.null() {
		return true
	}
	major, _, arg, ok := r.head()
	if !ok || major != majorText {
		return false
	}
	b, ok := r.text(arg)
	*p = T(b)
	return ok
}

// enum decodes text or null into an enum field. A known value shares the
// constant's string; any other is kept for Validate to name.
func enum[T ~string](r *cborReader, p *T, known []T) bool {
	if r.null() {
		return true
	}
	major, _, arg, ok := r.head()
	if !ok || major != majorText {
		return false
	}
	b, ok := r.text(arg)
	if !ok {
		return false
	}
	for _, k := range known {
		if string(k) == string(b) {
			*p = k
			return true
		}
	}
	*p = T(b)
	return true
}

// unsigned decodes an integer that fits T, or null, into an unsigned field.
func unsigned[T uint32 | uint64](r *cborReader, p *T) bool {
	if r.null() {
		return true
	}
	major, _, arg, ok := r.head()
	if !ok || major != majorUint || arg > uint64(^T(0)) {
		return false
	}
	*p = T(arg)
	return true
}

// signed decodes an integer that fits int64, or null, into an int64 field.
func signed(r *cborReader, p *int64) bool {
	if r.null() {
		return true
	}
	major, _, arg, ok := r.head()
	if !ok || arg > math.MaxInt64 {
		return false
	}
	switch major {
	case majorUint:
		*p = int64(arg)
	case majorNegInt:
		*p = -1 - int64(arg)
	default:
		return false
	}
	return true
}

// list decodes an array into a slice, or null into nil. elem decodes one
// element; a null element is left zero.
func list[T any](r *cborReader, p *[]T, elem func(*T) bool) bool {
	if r.null() {
		return true
	}
	major, _, arg, ok := r.head()
	if !ok || major != majorArray {
		return false
	}
	n, ok := r.enter(major, arg)
	if !ok {
		return false
	}
	s := make([]T, n)
	for i := range s {
		if !r.null() && !elem(&s[i]) {
			return false
		}
	}
	*p = s
	r.leave()
	return true
}

// ptr decodes a map into a new T, or null into nil, into a pointer field.
func ptr[T any](r *cborReader, p **T, decode func(*T) bool) bool {
	if r.null() {
		return true
	}
	*p = new(T)
	return decode(*p)
}

// mapField decodes a map, or null into nil, into a free-form map field.
func (r *cborReader) mapField(p *map[string]any) bool {
	if r.null() {
		return true
	}
	major, _, arg, ok := r.head()
	if !ok || major != majorMap {
		return false
	}
	*p, ok = r.freeMap(arg)
	return ok
}

// anyField decodes a free-form value into an any field; null is nil.
func (r *cborReader) anyField(p *any) bool {
	v, ok := r.value()
	*p = v
	return ok
}

// value decodes a free-form value into the JSON data model as the strict
// decoder does: an integer to int64, any other number to float64, an
// object to map[string]any, an array to []any.
func (r *cborReader) value() (any, bool) {
	major, ai, arg, ok := r.head()
	if !ok {
		return nil, false
	}
	switch major {
	case majorUint:
		return int64(arg), arg <= math.MaxInt64
	case majorNegInt:
		return -1 - int64(arg), arg <= math.MaxInt64
	case majorText:
		b, ok := r.text(arg)
		return string(b), ok
	case majorArray:
		return r.array(arg)
	case majorMap:
		return r.freeMap(arg)
	case majorSimple:
		return simple(ai, arg)
	}
	return nil, false // byte strings and tags
}

// simple decodes false, true, null and finite floats.
func simple(ai byte, arg uint64) (any, bool) {
	switch ai {
	case aiFalse:
		return false, true
	case aiTrue:
		return true, true
	case aiNull:
		return nil, true
	}
	return decodeFloat(ai, arg)
}

func (r *cborReader) array(arg uint64) ([]any, bool) {
	n, ok := r.enter(majorArray, arg)
	if !ok {
		return nil, false
	}
	a := make([]any, n)
	for i := range a {
		if a[i], ok = r.value(); !ok {
			return nil, false
		}
	}
	r.leave()
	return a, true
}

func (r *cborReader) freeMap(arg uint64) (map[string]any, bool) {
	n, ok := r.enter(majorMap, arg)
	if !ok {
		return nil, false
	}
	m := make(map[string]any, n)
	for range n {
		key, ok := r.key()
		if !ok {
			return nil, false
		}
		if _, dup := m[string(key)]; dup {
			return nil, false
		}
		if m[string(key)], ok = r.value(); !ok {
			return nil, false
		}
	}
	r.leave()
	return m, true
}
