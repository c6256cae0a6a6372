package meter

import (
	"fmt"

	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// Element segment flag bits.
const (
	elemPassiveOrDeclared = 1 << 0
	elemExplicitTable     = 1 << 1 // with bit 0 clear; with it set, declarative
	elemExpressions       = 1 << 2
)

// rewriteElements remaps the function indices in element segments, in
// either of their encodings: a vector of indices or of expressions.
func rewriteElements(p []byte, remap func(uint32) (uint32, error)) ([]byte, error) {
	r := wasmbin.NewReader(p)
	n, err := r.Count(1)
	if err != nil {
		return nil, fmt.Errorf("element section: %w", err)
	}
	out := wasmbin.AppendU32(make([]byte, 0, len(p)+len(p)/8), n)
	for i := range n {
		if out, err = rewriteElement(out, r, remap); err != nil {
			return nil, fmt.Errorf("element segment %d: %w", i, err)
		}
	}
	return out, nil
}

func rewriteElement(out []byte, r *wasmbin.Reader, remap func(uint32) (uint32, error)) ([]byte, error) {
	flags, err := r.U32()
	if err != nil {
		return nil, err
	}
	if flags > 7 {
		return nil, fmt.Errorf("unknown flags %d", flags)
	}
	out = wasmbin.AppendU32(out, flags)
	active := flags&elemPassiveOrDeclared == 0
	if active && flags&elemExplicitTable != 0 {
		table, err := r.U32()
		if err != nil {
			return nil, err
		}
		out = wasmbin.AppendU32(out, table)
	}
	if active {
		if out, err = wasmbin.AppendConstExpr(out, r, remap); err != nil {
			return nil, fmt.Errorf("offset: %w", err)
		}
	}
	// Segments with flags 0 and 4 imply funcref and have no kind byte.
	if flags&^elemExpressions != 0 {
		kind, err := r.Byte()
		if err != nil {
			return nil, err
		}
		out = append(out, kind)
	}
	return rewriteElementItems(out, r, flags&elemExpressions != 0, remap)
}

func rewriteElementItems(out []byte, r *wasmbin.Reader, exprs bool, remap func(uint32) (uint32, error)) ([]byte, error) {
	n, err := r.Count(1)
	if err != nil {
		return nil, err
	}
	out = wasmbin.AppendU32(out, n)
	for i := range n {
		if exprs {
			out, err = wasmbin.AppendConstExpr(out, r, remap)
		} else {
			out, err = appendElementIndex(out, r, remap)
		}
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
	}
	return out, nil
}

func appendElementIndex(out []byte, r *wasmbin.Reader, remap func(uint32) (uint32, error)) ([]byte, error) {
	f, err := r.U32()
	if err != nil {
		return nil, err
	}
	if f, err = remap(f); err != nil {
		return nil, err
	}
	return wasmbin.AppendU32(out, f), nil
}

// Name section subsections that hold function indices.
const (
	namesFunctions = 1
	namesLocals    = 2
	namesLabels    = 3
)

// rewriteNames keeps the name section true to the rewritten module: a
// defined function's name goes to both its wrapper and its twin, its local
// names to its twin, whose locals sit one index higher. Label names are
// dropped: the rewrite renumbers labels, and wazero does not read them.
func (rw *rewriter) rewriteNames(p []byte) ([]byte, error) {
	r := wasmbin.NewReader(p)
	out := make([]byte, 0, len(p)+len(p)/2)
	for r.Len() > 0 {
		id, err := r.Byte()
		if err != nil {
			return nil, err
		}
		size, err := r.U32()
		if err != nil {
			return nil, err
		}
		sub, err := r.Bytes(int(size))
		if err != nil {
			return nil, fmt.Errorf("subsection %d: %w", id, err)
		}
		switch id {
		case namesLabels:
			continue
		case namesFunctions:
			if sub, err = rw.rewriteFunctionNames(sub); err != nil {
				return nil, fmt.Errorf("function names: %w", err)
			}
		case namesLocals:
			if sub, err = rw.rewriteLocalNames(sub); err != nil {
				return nil, fmt.Errorf("local names: %w", err)
			}
		}
		out = append(out, id)
		out = wasmbin.AppendU32(out, uint32(len(sub)))
		out = append(out, sub...)
	}
	return out, nil
}

// nameEntry is one entry of a name map, or of an indirect name map, whose
// value is then an encoded name map.
type nameEntry struct {
	index uint32
	value []byte // encoded
}

// minNameEntrySize is the fewest bytes an entry of a name map takes: the
// index and an empty name, or an empty name map.
const minNameEntrySize = 2

func readNameMap(p []byte, indirect bool) ([]nameEntry, error) {
	r := wasmbin.NewReader(p)
	n, err := r.Count(minNameEntrySize)
	if err != nil {
		return nil, err
	}
	entries := make([]nameEntry, 0, n)
	for range n {
		index, err := r.U32()
		if err != nil {
			return nil, err
		}
		start := r.Pos()
		if indirect {
			err = skipNameMap(r)
		} else {
			_, err = r.Name()
		}
		if err != nil {
			return nil, err
		}
		entries = append(entries, nameEntry{index, r.Slice(start, r.Pos())})
	}
	return entries, nil
}

func appendNameMap(dst []byte, entries []nameEntry) []byte {
	dst = wasmbin.AppendU32(dst, uint32(len(entries)))
	for _, e := range entries {
		dst = wasmbin.AppendU32(dst, e.index)
		dst = append(dst, e.value...)
	}
	return dst
}

func skipNameMap(r *wasmbin.Reader) error {
	n, err := r.Count(minNameEntrySize)
	if err != nil {
		return err
	}
	for range n {
		if _, err := r.U32(); err != nil {
			return err
		}
		if _, err := r.Name(); err != nil {
			return err
		}
	}
	return nil
}

// rewriteFunctionNames names each wrapper and then each twin. Both keep
// the original order, and every twin comes after every wrapper, so the map
// stays sorted by index as the format requires.
func (rw *rewriter) rewriteFunctionNames(p []byte) ([]byte, error) {
	entries, err := readNameMap(p, false)
	if err != nil {
		return nil, err
	}
	out := make([]nameEntry, 0, 2*len(entries))
	for _, e := range entries {
		if err := rw.l.checkFunc(e.index); err != nil {
			return nil, err
		}
		out = append(out, nameEntry{rw.l.remapFunc(e.index), e.value})
	}
	for _, e := range entries {
		if e.index >= rw.l.importedFuncs {
			out = append(out, nameEntry{rw.l.twin(e.index), e.value})
		}
	}
	return appendNameMap(nil, out), nil
}

// rewriteLocalNames moves a defined function's local names to its twin.
func (rw *rewriter) rewriteLocalNames(p []byte) ([]byte, error) {
	entries, err := readNameMap(p, true)
	if err != nil {
		return nil, err
	}
	for i, e := range entries {
		if err := rw.l.checkFunc(e.index); err != nil {
			return nil, err
		}
		if e.index < rw.l.importedFuncs {
			continue
		}
		locals, err := rw.twinLocalNames(e.index-rw.l.importedFuncs, e.value)
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", e.index, err)
		}
		entries[i] = nameEntry{rw.l.twin(e.index), locals}
	}
	return appendNameMap(nil, entries), nil
}

// twinLocalNames renumbers the local names of defined function f for its
// twin, whose locals sit one index higher, past the counter parameter.
func (rw *rewriter) twinLocalNames(f uint32, names []byte) ([]byte, error) {
	nparams := uint32(len(rw.l.types[rw.l.funcTypes[f]].params))
	nlocals := uint64(nparams) + uint64(rw.l.localCounts[f])
	locals, err := readNameMap(names, false)
	if err != nil {
		return nil, err
	}
	for j := range locals {
		if uint64(locals[j].index) >= nlocals {
			return nil, fmt.Errorf("local %d does not exist (the function has %d)", locals[j].index, nlocals)
		}
		if locals[j].index >= nparams {
			locals[j].index++
		}
	}
	return appendNameMap(nil, locals), nil
}
