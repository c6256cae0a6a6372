// Package encodecount is a value that counts how often it is encoded, as
// JSON and as CBOR, from any goroutine: for the tests that hold the
// server to encoding a command's parameters once per format.
package encodecount

import "sync/atomic"

// Param is a parameter value that counts its encodings. Its zero value is
// not usable: make one with New.
type Param struct{ json, cbor *atomic.Int64 }

// New is a Param that has not been encoded.
func New() Param { return Param{new(atomic.Int64), new(atomic.Int64)} }

// MarshalJSON encodes p as "x", counting it.
func (p Param) MarshalJSON() ([]byte, error) { p.json.Add(1); return []byte(`"x"`), nil }

// MarshalCBOR encodes p as the text "x", counting it.
func (p Param) MarshalCBOR() ([]byte, error) { p.cbor.Add(1); return []byte{0x61, 'x'}, nil }

// JSON counts p's encodings as JSON so far.
func (p Param) JSON() int64 { return p.json.Load() }

// CBOR counts p's encodings as CBOR so far.
func (p Param) CBOR() int64 { return p.cbor.Load() }

// Reset forgets the counts so far.
func (p Param) Reset() { p.json.Store(0); p.cbor.Store(0) }
