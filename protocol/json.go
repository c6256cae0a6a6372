package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parseJSON reads one JSON value into the JSON data model (map[string]any,
// []any, string, int64, float64, bool, nil) under the limits encoding/json
// lacks: nesting depth, collection sizes, duplicate keys and valid UTF-8.
// An integer literal becomes int64 (uint64 above that), as Python keeps it
// an int; every other number becomes float64.
func parseJSON(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("invalid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := jsonParser{dec: dec}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// jsonParser builds a value from encoding/json's tokens.
type jsonParser struct {
	dec   *json.Decoder
	depth int
}

func (p *jsonParser) value() (any, error) {
	tok, err := p.dec.Token()
	if err == io.EOF {
		return nil, io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if p.depth++; p.depth > MaxDepth {
			return nil, fmt.Errorf("nesting deeper than %d levels", MaxDepth)
		}
		defer func() { p.depth-- }()
		if t == '{' {
			return p.object()
		}
		return p.array()
	case json.Number:
		return jsonNumber(t)
	default: // string, bool or nil
		return t, nil
	}
}

func (p *jsonParser) object() (map[string]any, error) {
	m := map[string]any{}
	for p.dec.More() {
		tok, err := p.dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string) // encoding/json only yields a string in key position
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("duplicate key %q", clip(key))
		}
		if len(m) == MaxMapPairs {
			return nil, fmt.Errorf("map with more than %d pairs", MaxMapPairs)
		}
		if m[key], err = p.value(); err != nil {
			return nil, err
		}
	}
	return m, p.end()
}

func (p *jsonParser) array() ([]any, error) {
	a := []any{}
	for p.dec.More() {
		if len(a) == MaxArrayElements {
			return nil, fmt.Errorf("array longer than %d elements", MaxArrayElements)
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
	}
	return a, p.end()
}

// end reads the '}' or ']' that closes a collection.
func (p *jsonParser) end() error {
	_, err := p.dec.Token()
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func jsonNumber(n json.Number) (any, error) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		// Beyond int64: a uint64 field may take it; a free-form value
		// refuses it, as it refuses the same integer in CBOR.
		if u, err := strconv.ParseUint(s, 10, 64); err == nil {
			return u, nil
		}
		return nil, fmt.Errorf("integer %s: out of range", s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s: out of range", s)
	}
	return f, nil
}
