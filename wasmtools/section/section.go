// Package section reads and edits the top-level sections of a WebAssembly
// binary: the custom sections that carry a tool's manifest and signature,
// and the import and export sections that say what a module needs and
// offers. It decodes no code: a module is a sequence of sections, and
// everything here works on that sequence.
package section

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Section ids from the WebAssembly core specification.
const (
	IDCustom byte = 0
	IDImport byte = 2
	IDMemory byte = 5
	IDExport byte = 7
)

// header is the magic number and version 1 of the binary format.
var header = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}

// ErrNotWasm means the bytes do not start like a WebAssembly module.
var ErrNotWasm = errors.New("not a WebAssembly module (bad magic or version)")

// Section is one top-level section of a module.
type Section struct {
	ID byte
	// Name is the name of a custom section; empty for the others.
	Name string
	// Payload is the section's content; for a custom section, what
	// follows its name.
	Payload []byte
	// Raw is the whole section as it appears in the module: id, size and
	// content.
	Raw []byte
}

// Parse splits wasm into its sections, in order. It checks the header and
// that every size fits; it does not validate section contents beyond
// custom section names.
func Parse(wasm []byte) ([]Section, error) {
	if !bytes.HasPrefix(wasm, header) {
		return nil, ErrNotWasm
	}
	var out []Section
	for off := len(header); off < len(wasm); {
		start := off
		id := wasm[off]
		size, n := binary.Uvarint(wasm[off+1:])
		if n <= 0 || n > 5 {
			return nil, fmt.Errorf("section at offset %d: bad size", start)
		}
		off += 1 + n
		if size > uint64(len(wasm)-off) {
			return nil, fmt.Errorf("section at offset %d: size %d runs past the end of the module", start, size)
		}
		s := Section{ID: id, Payload: wasm[off : off+int(size)], Raw: wasm[start : off+int(size)]}
		off += int(size)
		if id == IDCustom {
			name, rest, err := readName(s.Payload)
			if err != nil {
				return nil, fmt.Errorf("custom section at offset %d: name: %w", start, err)
			}
			s.Name, s.Payload = name, rest
		}
		out = append(out, s)
	}
	return out, nil
}

// Custom returns the payload of the custom section called name. A module
// with two sections of that name is an error: a reader and a verifier that
// picked different ones could be made to disagree.
func Custom(wasm []byte, name string) (payload []byte, found bool, err error) {
	secs, err := Parse(wasm)
	if err != nil {
		return nil, false, err
	}
	for _, s := range secs {
		if s.ID != IDCustom || s.Name != name {
			continue
		}
		if found {
			return nil, false, fmt.Errorf("custom section %q appears more than once", name)
		}
		payload, found = s.Payload, true
	}
	return payload, found, nil
}

// WithoutCustom returns wasm with every custom section called name left
// out; all other bytes are kept as they are, in order.
func WithoutCustom(wasm []byte, name string) ([]byte, error) {
	secs, err := Parse(wasm)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(wasm))
	out = append(out, header...)
	for _, s := range secs {
		if s.ID == IDCustom && s.Name == name {
			continue
		}
		out = append(out, s.Raw...)
	}
	return out, nil
}

// WithCustom returns wasm with the custom section called name replaced by
// one holding payload, appended at the end.
func WithCustom(wasm []byte, name string, payload []byte) ([]byte, error) {
	out, err := WithoutCustom(wasm, name)
	if err != nil {
		return nil, err
	}
	content := binary.AppendUvarint(nil, uint64(len(name)))
	content = append(content, name...)
	content = append(content, payload...)
	out = append(out, IDCustom)
	out = binary.AppendUvarint(out, uint64(len(content)))
	return append(out, content...), nil
}

// readName reads a WebAssembly name: a length-prefixed UTF-8 string.
func readName(b []byte) (string, []byte, error) {
	size, n := binary.Uvarint(b)
	if n <= 0 || n > 5 {
		return "", nil, errors.New("bad length")
	}
	b = b[n:]
	if size > uint64(len(b)) {
		return "", nil, errors.New("length runs past the section")
	}
	name := b[:size]
	if !utf8.Valid(name) {
		return "", nil, errors.New("not UTF-8")
	}
	return string(name), b[size:], nil
}
