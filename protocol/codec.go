package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
)

// Subprotocol is the WebSocket subprotocol that selects the CBOR encoding.
const Subprotocol = "aip.cbor.v1"

// Limits every decoder enforces, whatever the encoding.
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

// Message is a top-level AIP message: a *ServerMessage or a *ClientMessage.
type Message interface {
	// Validate checks required fields and enum values, naming the field and
	// the value that is wrong.
	Validate() error
}

var (
	cborEnc = mustEncMode()
	cborDec = mustDecMode()
)

func mustEncMode() cbor.EncMode {
	em, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err) // static options; cannot fail at run time
	}
	return em
}

func mustDecMode() cbor.DecMode {
	dm, err := cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		IndefLength:      cbor.IndefLengthForbidden,
		UTF8:             cbor.UTF8RejectInvalid,
		MaxNestedLevels:  MaxDepth,
		MaxArrayElements: MaxArrayElements,
		MaxMapPairs:      MaxMapPairs,
		DefaultMapType:   reflect.TypeFor[map[string]any](),
	}.DecMode()
	if err != nil {
		panic(err) // static options; cannot fail at run time
	}
	return dm
}

// Marshal encodes v. CBOR output is deterministic: equal messages give equal
// bytes.
func (e Encoding) Marshal(v any) ([]byte, error) {
	var (
		b   []byte
		err error
	)
	if e == CBOR {
		b, err = cborEnc.Marshal(v)
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", e, err)
	}
	return b, nil
}

// Unmarshal decodes data into m strictly, applies UFO's defaults, and
// validates the result. Every error wraps [ErrMalformed].
func (e Encoding) Unmarshal(data []byte, m Message) error {
	var err error
	if e == CBOR {
		err = cborDec.Unmarshal(data, m)
	} else {
		err = unmarshalJSON(data, m)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformed, e, err)
	}
	if d, ok := m.(interface{ applyDefaults() }); ok {
		d.applyDefaults()
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

// UnmarshalValue decodes data into any value with the same limits as
// messages, without message validation. It serves payloads nested in
// messages, such as tool results.
func (e Encoding) UnmarshalValue(data []byte, v any) error {
	if e == CBOR {
		return cborDec.Unmarshal(data, v)
	}
	return unmarshalJSON(data, v)
}

func unmarshalJSON(data []byte, v any) error {
	if !utf8.Valid(data) {
		return errors.New("invalid UTF-8")
	}
	if err := checkJSONShape(data); err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// checkJSONShape enforces the limits encoding/json lacks: nesting depth,
// collection sizes and duplicate object keys.
func checkJSONShape(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*jsonFrame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		d, isDelim := tok.(json.Delim)
		if isDelim && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if len(stack) > 0 {
			if err := stack[len(stack)-1].take(tok); err != nil {
				return err
			}
		}
		if isDelim {
			if len(stack) == MaxDepth {
				return fmt.Errorf("nesting deeper than %d", MaxDepth)
			}
			stack = append(stack, &jsonFrame{object: d == '{', wantKey: d == '{'})
		}
	}
}

// jsonFrame tracks one open JSON object or array during checkJSONShape.
type jsonFrame struct {
	object  bool
	wantKey bool
	n       int
	keys    map[string]struct{}
}

// take accounts for the next token inside the frame: a key or a value.
func (f *jsonFrame) take(tok json.Token) error {
	if !f.object {
		if f.n++; f.n > MaxArrayElements {
			return fmt.Errorf("array longer than %d elements", MaxArrayElements)
		}
		return nil
	}
	if !f.wantKey {
		f.wantKey = true
		return nil
	}
	f.wantKey = false
	key, _ := tok.(string)
	if f.n++; f.n > MaxMapPairs {
		return fmt.Errorf("object with more than %d pairs", MaxMapPairs)
	}
	if f.keys == nil {
		f.keys = make(map[string]struct{})
	}
	if _, dup := f.keys[key]; dup {
		return fmt.Errorf("duplicate key %q", key)
	}
	f.keys[key] = struct{}{}
	return nil
}
