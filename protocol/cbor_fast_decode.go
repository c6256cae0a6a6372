package protocol

import (
	"math"
	"unicode/utf8"
)

// The fast decoder: a hand-written, single-pass CBOR decoder for the two
// top-level messages. It takes only what it can vouch for and gives up on
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
// whether it could. When it could not, m may be partly filled.
func decodeFast(data []byte, m Message) bool {
	r := cborReader{data: data}
	var ok bool
	switch m := m.(type) {
	case *ServerMessage:
		ok = r.serverMessage(m)
	case *ClientMessage:
		ok = r.clientMessage(m)
	}
	return ok && r.off == len(data)
}

func (r *cborReader) serverMessage(m *ServerMessage) bool {
	return r.fields(func(key []byte) (uint32, bool) {
		switch string(key) {
		case "type":
			return 1 << 0, enum(r, &m.Type, serverMessageTypes[:])
		case "status":
			return 1 << 1, enum(r, &m.Status, taskStatuses[:])
		case "user_request":
			return 1 << 2, text(r, &m.UserRequest)
		case "agent_name":
			return 1 << 3, text(r, &m.AgentName)
		case "process_name":
			return 1 << 4, text(r, &m.ProcessName)
		case "root_name":
			return 1 << 5, text(r, &m.RootName)
		case "actions":
			return 1 << 6, list(r, &m.Actions, r.command)
		case "messages":
			return 1 << 7, list(r, &m.Messages, func(s *string) bool { return text(r, s) })
		case "error":
			return 1 << 8, text(r, &m.Error)
		case "session_id":
			return 1 << 9, text(r, &m.SessionID)
		case "task_name":
			return 1 << 10, text(r, &m.TaskName)
		case "timestamp":
			return 1 << 11, text(r, &m.Timestamp)
		case "response_id":
			return 1 << 12, text(r, &m.ResponseID)
		case "result":
			return 1 << 13, r.anyField(&m.Result)
		}
		return 0, true
	})
}

func (r *cborReader) clientMessage(m *ClientMessage) bool {
	return r.fields(func(key []byte) (uint32, bool) {
		switch string(key) {
		case "type":
			return 1 << 0, enum(r, &m.Type, clientMessageTypes[:])
		case "status":
			return 1 << 1, enum(r, &m.Status, taskStatuses[:])
		case "client_type":
			return 1 << 2, enum(r, &m.ClientType, clientTypes[:])
		case "session_id":
			return 1 << 3, text(r, &m.SessionID)
		case "task_name":
			return 1 << 4, text(r, &m.TaskName)
		case "client_id":
			return 1 << 5, text(r, &m.ClientID)
		case "target_id":
			return 1 << 6, text(r, &m.TargetID)
		case "request":
			return 1 << 7, text(r, &m.Request)
		case "action_results":
			return 1 << 8, list(r, &m.ActionResults, r.result)
		case "timestamp":
			return 1 << 9, text(r, &m.Timestamp)
		case "request_id":
			return 1 << 10, text(r, &m.RequestID)
		case "prev_response_id":
			return 1 << 11, text(r, &m.PrevResponseID)
		case "error":
			return 1 << 12, text(r, &m.Error)
		case "metadata":
			return 1 << 13, r.mapField(&m.Metadata)
		}
		return 0, true
	})
}

func (r *cborReader) command(c *Command) bool {
	return r.fields(func(key []byte) (uint32, bool) {
		switch string(key) {
		case "tool_name":
			return 1 << 0, text(r, &c.ToolName)
		case "parameters":
			return 1 << 1, r.mapField(&c.Parameters)
		case "tool_type":
			return 1 << 2, enum(r, &c.ToolType, ToolTypes[:])
		case "call_id":
			return 1 << 3, text(r, &c.CallID)
		}
		return 0, true
	})
}

func (r *cborReader) result(res *Result) bool {
	return r.fields(func(key []byte) (uint32, bool) {
		switch string(key) {
		case "status":
			return 1 << 0, enum(r, &res.Status, resultStatuses[:])
		case "error":
			return 1 << 1, text(r, &res.Error)
		case "result":
			return 1 << 2, r.anyField(&res.Result)
		case "namespace":
			return 1 << 3, text(r, &res.Namespace)
		case "call_id":
			return 1 << 4, text(r, &res.CallID)
		case "usage":
			return 1 << 5, r.usageField(&res.Usage)
		}
		return 0, true
	})
}

func (r *cborReader) usageField(p **Usage) bool {
	if r.null() {
		return true
	}
	u := new(Usage)
	*p = u
	return r.fields(func(key []byte) (uint32, bool) {
		switch string(key) {
		case "fuel":
			return 1 << 0, unsigned(r, &u.Fuel)
		case "wall_us":
			return 1 << 1, signed(r, &u.WallMicros)
		case "memory_pages":
			return 1 << 2, unsigned(r, &u.MemoryPages)
		case "stdout_bytes":
			return 1 << 3, signed(r, &u.StdoutBytes)
		}
		return 0, true
	})
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
