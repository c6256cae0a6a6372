package wasmbin

import (
	"bytes"
	"fmt"
)

// Section IDs from the core specification, plus the tag section of the
// exception-handling proposal so that it can be named in errors.
const (
	SectionCustom    byte = 0
	SectionType      byte = 1
	SectionImport    byte = 2
	SectionFunction  byte = 3
	SectionTable     byte = 4
	SectionMemory    byte = 5
	SectionGlobal    byte = 6
	SectionExport    byte = 7
	SectionStart     byte = 8
	SectionElement   byte = 9
	SectionCode      byte = 10
	SectionData      byte = 11
	SectionDataCount byte = 12
	SectionTag       byte = 13
)

// header is the magic number and version 1 that start every module.
var header = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// Section is one section of a module. Payload aliases the input.
type Section struct {
	ID      byte
	Name    string // custom sections only
	Payload []byte // for custom sections, the bytes after the name
}

// ReadSections splits a module into its sections, in file order.
func ReadSections(wasm []byte) ([]Section, error) {
	if !bytes.HasPrefix(wasm, header) {
		return nil, fmt.Errorf("not a WebAssembly 1.0 module: header % x", wasm[:min(len(wasm), 8)])
	}
	r := NewReader(wasm[len(header):])
	var out []Section
	for r.Len() > 0 {
		s, err := readSection(r)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func readSection(r *Reader) (Section, error) {
	at := r.Pos() + len(header)
	id, err := r.Byte()
	if err != nil {
		return Section{}, err
	}
	size, err := r.U32()
	if err != nil {
		return Section{}, fmt.Errorf("section %d at offset %d: size: %w", id, at, err)
	}
	payload, err := r.Bytes(int(size))
	if err != nil {
		return Section{}, fmt.Errorf("section %d at offset %d: %w", id, at, err)
	}
	s := Section{ID: id, Payload: payload}
	if id == SectionCustom {
		pr := NewReader(payload)
		if s.Name, err = pr.Name(); err != nil {
			return Section{}, fmt.Errorf("custom section at offset %d: name: %w", at, err)
		}
		s.Payload = pr.Rest()
	}
	return s, nil
}

// AppendModuleHeader appends the magic number and version.
func AppendModuleHeader(b []byte) []byte { return append(b, header...) }

// AppendSection appends s with its ID and size.
func AppendSection(b []byte, s Section) []byte {
	b = append(b, s.ID)
	if s.ID != SectionCustom {
		b = AppendU32(b, uint32(len(s.Payload)))
		return append(b, s.Payload...)
	}
	name := AppendName(nil, s.Name)
	b = AppendU32(b, uint32(len(name)+len(s.Payload)))
	b = append(b, name...)
	return append(b, s.Payload...)
}

// Order is the position a non-custom section must take in a module, which
// is not its ID: the data count and tag sections were added later and sit
// between older ones.
func Order(id byte) int {
	switch id {
	case SectionTag:
		return 55 // between memory (5) and global (6)
	case SectionDataCount:
		return 95 // between element (9) and code (10)
	default:
		return int(id) * 10
	}
}
