package section

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Kinds of import and export.
const (
	KindFunc   = "func"
	KindTable  = "table"
	KindMemory = "memory"
	KindGlobal = "global"
	KindTag    = "tag"
)

var kinds = [...]string{KindFunc, KindTable, KindMemory, KindGlobal, KindTag}

// Import is one entry of the import section.
type Import struct {
	Module string `json:"module"`
	Name   string `json:"name"`
	Kind   string `json:"kind"`
}

// Export is one entry of the export section.
type Export struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// Imports lists what wasm imports, in order.
func Imports(wasm []byte) ([]Import, error) {
	payload, err := standard(wasm, IDImport)
	if err != nil || payload == nil {
		return nil, err
	}
	r := &reader{b: payload}
	n := r.uint()
	var out []Import
	for i := uint64(0); i < n && r.err == nil; i++ {
		imp := Import{Module: r.name(), Name: r.name()}
		imp.Kind = r.kind()
		r.skipImportDesc(imp.Kind)
		out = append(out, imp)
	}
	if r.err != nil {
		return nil, fmt.Errorf("import section: entry %d: %w", len(out), r.err)
	}
	return out, nil
}

// Exports lists what wasm exports, in order.
func Exports(wasm []byte) ([]Export, error) {
	payload, err := standard(wasm, IDExport)
	if err != nil || payload == nil {
		return nil, err
	}
	r := &reader{b: payload}
	n := r.uint()
	var out []Export
	for i := uint64(0); i < n && r.err == nil; i++ {
		exp := Export{Name: r.name(), Kind: r.kind()}
		r.uint() // index
		out = append(out, exp)
	}
	if r.err != nil {
		return nil, fmt.Errorf("export section: entry %d: %w", len(out), r.err)
	}
	return out, nil
}

// MinMemoryPages is the initial size, in 64 KiB pages, of the memory wasm
// defines, or 0 if it defines none.
func MinMemoryPages(wasm []byte) (uint64, error) {
	payload, err := standard(wasm, IDMemory)
	if err != nil || payload == nil {
		return 0, err
	}
	r := &reader{b: payload}
	var most uint64
	for n, i := r.uint(), uint64(0); i < n && r.err == nil; i++ {
		most = max(most, r.limits())
	}
	if r.err != nil {
		return 0, fmt.Errorf("memory section: %w", r.err)
	}
	return most, nil
}

// standard returns the payload of the non-custom section id, or nil.
func standard(wasm []byte, id byte) ([]byte, error) {
	secs, err := Parse(wasm)
	if err != nil {
		return nil, err
	}
	for _, s := range secs {
		if s.ID == id {
			return s.Payload, nil
		}
	}
	return nil, nil
}

// reader decodes the few encodings the import and export sections use. The
// first error sticks; later reads return zero values.
type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("truncated")

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) == 0 {
		r.fail(errShort)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || n > 10 {
		r.fail(errors.New("bad LEB128 integer"))
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) name() string {
	if r.err != nil {
		return ""
	}
	s, rest, err := readName(r.b)
	if err != nil {
		r.fail(fmt.Errorf("name: %w", err))
		return ""
	}
	r.b = rest
	return s
}

func (r *reader) kind() string {
	k := r.byte()
	if int(k) >= len(kinds) {
		r.fail(fmt.Errorf("unknown kind %#x", k))
		return ""
	}
	return kinds[k]
}

// skipImportDesc skips the type that follows an import's kind.
func (r *reader) skipImportDesc(kind string) {
	switch kind {
	case KindFunc:
		r.uint()
	case KindTable:
		r.byte() // reference type
		r.limits()
	case KindMemory:
		r.limits()
	case KindGlobal:
		r.byte() // value type
		r.byte() // mutability
	case KindTag:
		r.byte() // attribute
		r.uint()
	}
}

// limits reads a limits encoding and returns its minimum.
func (r *reader) limits() uint64 {
	flags := r.byte()
	least := r.uint()
	if flags&1 != 0 {
		r.uint()
	}
	return least
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}
