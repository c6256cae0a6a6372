// Package encodedonce holds a command's parameter values with their
// encodings, made on first use: a value that the server checks, sends to
// one device or to a fleet, records and audits is encoded once as JSON
// and once as the wire's CBOR, however many times it is written out.
//
// The front door wraps the values of a request's parameters before it
// checks them; what reads a value afterwards (not what encodes it) reads
// it through [Unwrap]. What writes parameters as JSON writes them with
// [JSON] and [CommandsJSON], which copy each value's encoding: through
// encoding/json, which checks a Marshaler's bytes again, a copy would
// cost more than the encoding it saves.
package encodedonce

import (
	"sync"

	"github.com/edgeaip/edgeaip/protocol"
)

// Value is a parameter value that keeps its JSON and CBOR encodings once
// made. It is safe for use by many goroutines: the devices of a fleet
// are sent one value at once. Its encodings are held by pointer, because
// the CBOR encoder calls MarshalCBOR on a copy of the Value.
type Value struct {
	v          any
	json, cbor *encoding
}

// encoding is one format's encoding of a Value, made once.
type encoding struct {
	once sync.Once
	b    []byte
	err  error
}

func (e *encoding) of(v any, enc protocol.Encoding) ([]byte, error) {
	e.once.Do(func() { e.b, e.err = enc.Marshal(v) })
	return e.b, e.err
}

// MarshalJSON is the value as compact JSON that does not escape <, > and
// &, as the JSON wire writes it; encoding/json escapes them where it
// embeds these bytes, as it would have in the value.
func (v *Value) MarshalJSON() ([]byte, error) { return v.json.of(v.v, protocol.JSON) }

// MarshalCBOR is the value as the wire's deterministic CBOR.
func (v *Value) MarshalCBOR() ([]byte, error) { return v.cbor.of(v.v, protocol.CBOR) }

// Preencoded tells the wire's fast encoder to copy MarshalCBOR's bytes.
func (v *Value) Preencoded() {}

// Wrap replaces each value of params, in place, by a *Value holding it;
// a value already wrapped stays as it is.
func Wrap(params map[string]any) {
	for k, v := range params {
		if _, ok := v.(*Value); !ok {
			params[k] = &Value{v: v, json: new(encoding), cbor: new(encoding)}
		}
	}
}

// Unwrap is the value v holds if it is a *Value, else v.
func Unwrap(v any) any {
	if w, ok := v.(*Value); ok {
		return w.v
	}
	return v
}

// Plain is a copy of params with its values unwrapped, for code that
// reads them.
func Plain(params map[string]any) map[string]any {
	out := make(map[string]any, len(params))
	for k, v := range params {
		out[k] = Unwrap(v)
	}
	return out
}
