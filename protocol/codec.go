package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/fxamacker/cbor/v2"
)

// Subprotocol is the WebSocket subprotocol that selects the CBOR encoding.
const Subprotocol = "aip.cbor.v1"

// Limits every decoder enforces, whatever the encoding. A frame at the top
// is one level deep; its metadata map is two.
const (
	MaxDepth         = 32
	MaxArrayElements = 65536
	MaxMapPairs      = 65536
)

// ErrMalformed marks a frame that was read whole but could not be accepted:
// it does not decode, breaks a limit, or fails validation. The connection
// survives such a frame; see [Conn.Read].
var ErrMalformed = errors.New("malformed frame")

// Encoding is one of the two wire encodings of the AIP message model.
type Encoding int

// The encodings.
const (
	CBOR Encoding = iota
	JSON
)

func (e Encoding) String() string {
	if e == CBOR {
		return "cbor"
	}
	return "json"
}

// MarshalText writes the encoding's name, so that structured logs (slog's
// JSON handler) show "cbor" or "json" rather than its number.
func (e Encoding) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// Message is a top-level AIP message: a *ServerMessage or a *ClientMessage.
type Message interface {
	// Validate checks required fields and enum values, naming the field and
	// the value that is wrong.
	Validate() error
}

var (
	// cborEnc is aip.cbor.v1: Core Deterministic Encoding, so equal
	// messages give equal bytes. The fast encoder writes the same bytes
	// for messages (cbor_fast_encode.go).
	cborEnc = mustEncMode(cbor.CoreDetEncOptions())
	// cborDec is the strict decoder; the fast decoder accepts a subset of
	// what it accepts, with the same result (cbor_fast_decode.go).
	cborDec = mustDecMode()
)

func mustEncMode(opts cbor.EncOptions) cbor.EncMode {
	em, err := opts.EncMode()
	if err != nil {
		panic(err) // static options; cannot fail at run time
	}
	return em
}

// mustDecMode is the one decoder both encodings go through. It accepts the
// JSON data model only, so that whatever decodes can be sent on in either
// encoding: no tags, no NaN or infinity, no simple values but false, true
// and null, integers within int64.
func mustDecMode() cbor.DecMode {
	dm, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		UTF8:              cbor.UTF8RejectInvalid,
		MaxNestedLevels:   MaxDepth,
		MaxArrayElements:  MaxArrayElements,
		MaxMapPairs:       MaxMapPairs,
		DefaultMapType:    reflect.TypeFor[map[string]any](),
		FieldNameMatching: cbor.FieldNameMatchingCaseSensitive,
		IntDec:            cbor.IntDecConvertSignedOrFail,
		TagsMd:            cbor.TagsForbidden,
		NaN:               cbor.NaNDecodeForbidden,
		Inf:               cbor.InfDecodeForbidden,
		SimpleValues:      jsonSimpleValues(),
	}.DecMode()
	if err != nil {
		panic(err) // static options; cannot fail at run time
	}
	return dm
}

// jsonSimpleValues accepts the CBOR simple values JSON has: false, true and
// null.
func jsonSimpleValues() *cbor.SimpleValueRegistry {
	var reject []func(*cbor.SimpleValueRegistry) error
	for sv := range 256 {
		switch cbor.SimpleValue(sv) {
		case 20, 21, 22: // false, true, null
		case 24, 25, 26, 27, 28, 29, 30, 31: // not simple values: floats and reserved
		default:
			reject = append(reject, cbor.WithRejectedSimpleValue(cbor.SimpleValue(sv)))
		}
	}
	r, err := cbor.NewSimpleValueRegistryFromDefaults(reject...)
	if err != nil {
		panic(err) // static options; cannot fail at run time
	}
	return r
}

// Marshal encodes v. CBOR output is deterministic: equal messages give equal
// bytes. JSON output is compact and, like pydantic's, does not escape <, >
// and &.
func (e Encoding) Marshal(v any) ([]byte, error) {
	var (
		b   []byte
		err error
	)
	if e == CBOR {
		b, err = marshalCBOR(v)
	} else {
		b, err = marshalJSON(v)
	}
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", e, err)
	}
	return b, nil
}

func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Unmarshal decodes data into m strictly, applies UFO's defaults, and
// validates the result. m is reset first, so nothing of an earlier message
// remains. Every error wraps [ErrMalformed].
func (e Encoding) Unmarshal(data []byte, m Message) error {
	reset(m)
	if err := e.decodeMessage(data, m); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformed, e, err)
	}
	if d, ok := m.(interface{ applyDefaults() }); ok {
		d.applyDefaults()
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if err := e.carries(m); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

// carries refuses, on the JSON wire, a message type of edgeaip's own: the
// JSON wire follows UFO's models, which have none, and a UFO peer would
// refuse it.
func (e Encoding) carries(m Message) error {
	if e == CBOR {
		return nil
	}
	var ours string
	switch m := m.(type) {
	case *ServerMessage:
		if m.Type.ours() {
			ours = string(m.Type)
		}
	case *ClientMessage:
		if m.Type.ours() {
			ours = string(m.Type)
		}
	}
	if ours == "" {
		return nil
	}
	return fmt.Errorf("field \"type\": %q is edgeaip's own message type, carried on the CBOR wire (%s) only", ours, Subprotocol)
}

// reset zeroes the message m points to.
func reset(m Message) {
	if v := reflect.ValueOf(m); v.Kind() == reflect.Pointer && !v.IsNil() {
		v.Elem().SetZero()
	}
}

// decodeMessage decodes a frame into the zero message m with the fast
// decoder, or, when that gives up, with the strict one, which then says
// why the frame is refused.
func (e Encoding) decodeMessage(data []byte, m Message) error {
	data, err := e.asCBOR(data)
	if err != nil {
		return err
	}
	if decodeFast(data, m) {
		return nil
	}
	reset(m) // of what the fast decoder filled in before it gave up
	return decodeStrict(data, m)
}

// UnmarshalValue decodes data into any value with the same limits and
// rules as messages, without message validation. It serves payloads nested
// in messages, such as tool results. Numbers decode as messages' do: an
// integer to int64, anything else to float64.
func (e Encoding) UnmarshalValue(data []byte, v any) error {
	if err := e.decodeValue(data, v); err != nil {
		return fmt.Errorf("%s: %w", e, err)
	}
	return nil
}

func (e Encoding) decodeValue(data []byte, v any) error {
	if p, ok := v.(*any); ok && e == JSON {
		tree, err := parseJSON(data)
		if err == nil {
			*p = tree
		}
		return err
	}
	data, err := e.asCBOR(data)
	if err != nil {
		return err
	}
	return decodeStrict(data, v)
}

// asCBOR returns a frame as CBOR. A JSON frame is parsed into the JSON
// data model under our limits and encoded, so that both encodings go
// through one decoder and share one set of rules: exact, case-sensitive
// keys as pydantic matches them, null as absent, and the same number
// types.
func (e Encoding) asCBOR(data []byte) ([]byte, error) {
	if e == CBOR {
		return data, nil
	}
	tree, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	w := cborWriter{buf: make([]byte, 0, len(data))}
	w.value(tree)
	if w.err != nil {
		return nil, fmt.Errorf("transcode: %w", w.err)
	}
	return w.buf, nil
}

// decodeStrict is the reference decoder: fxamacker/cbor under cborDec,
// then the checks it skips inside the values of unknown fields.
func decodeStrict(data []byte, v any) error {
	if err := cborDec.Unmarshal(data, v); err != nil {
		return describeCBORError(err)
	}
	return checkKeysAndText(data)
}
