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
func rewriteElements(p []byte, remap func(uint32) uint32) ([]byte, error) {
	r := wasmbin.NewReader(p)
	n, err := r.U32()
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

func rewriteElement(out []byte, r *wasmbin.Reader, remap func(uint32) uint32) ([]byte, error) {
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

func rewriteElementItems(out []byte, r *wasmbin.Reader, exprs bool, remap func(uint32) uint32) ([]byte, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	out = wasmbin.AppendU32(out, n)
	for range n {
		if exprs {
			out, err = wasmbin.AppendConstExpr(out, r, remap)
		} else {
			var f uint32
			f, err = r.U32()
			out = wasmbin.AppendU32(out, remap(f))
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Name section subsections that hold function indices.
const (
	namesFunctions = 1
	namesLocals    = 2
	namesLabels    = 3
)

// rewriteNames remaps function indices in the function and local name
// maps, keeps other subsections, and drops label names: the added ifs
// renumber labels, and nothing in wazero reads them.
func (rw *rewriter) rewriteNames(p []byte) ([]byte, error) {
	r := wasmbin.NewReader(p)
	out := make([]byte, 0, len(p)+64)
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
		case namesFunctions, namesLocals:
			if sub, err = rw.remapNameMap(sub, id == namesLocals); err != nil {
				return nil, fmt.Errorf("subsection %d: %w", id, err)
			}
		}
		out = append(out, id)
		out = wasmbin.AppendU32(out, uint32(len(sub)))
		out = append(out, sub...)
	}
	return out, nil
}

// remapNameMap remaps the keys of a name map (index → name) or, when
// indirect, of an indirect name map (index → name map), whose inner maps
// are copied as they are.
func (rw *rewriter) remapNameMap(p []byte, indirect bool) ([]byte, error) {
	r := wasmbin.NewReader(p)
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(make([]byte, 0, len(p)+8), n)
	for range n {
		f, err := r.U32()
		if err != nil {
			return nil, err
		}
		out = wasmbin.AppendU32(out, rw.l.remapFunc(f))
		start := r.Pos()
		if indirect {
			err = skipNameMap(r)
		} else {
			_, err = r.Name()
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r.Slice(start, r.Pos())...)
	}
	return out, nil
}

func skipNameMap(r *wasmbin.Reader) error {
	n, err := r.U32()
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
