package meter

import (
	"bytes"
	"fmt"

	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// directCalls turns a module's calls through its table into direct calls,
// so that an instance has no table to fill. wazero v1.12 fills a table
// from the element segments in every instance, evaluating each entry and
// allocating a function reference for it: a Go module's table holds all
// of its functions (2 405 for a stock tool), which cost half a
// millisecond per instance, as much as the rest of a call from a
// snapshot. The entries are constants in a module that never changes its
// table (the snapshot form refuses one that does), so each call_indirect
// of type t becomes a call of a dispatcher for t: a br_table over the
// table's slots, each slot jumping to a direct call of the function it
// holds, returning what that returns.
//
// A slot that is empty, past the table's end or holds a function of
// another type goes to a call_indirect on the table, kept but emptied, so
// that the call traps as wazero traps an invalid table access.
//
// The dispatchers are not metered: the call_indirect they replace was
// paid for where it stood, and the counter, which a twin takes and
// returns, passes through them untouched. So fuel is unchanged. They
// reach the function with a tail call (return_call), so that an indirect
// call still takes one frame: a plain call would take two, and a
// recursion through the table would overflow the interpreter's 2 000
// frames before it reached the depth limit (CoreFeatures).
type directCalls struct {
	tableMin  uint32
	slots     []int64 // function index per slot; -1 if empty
	indirect  map[uint32]uint32
	types     []uint32 // call_indirect types, in order of first use
	funcTypes []uint32 // type index of each function, imports first
}

// planDirectCalls reads what directCalls needs from the snapshot module's
// sections. It returns nil, and the module keeps its table (correct, only
// slower to instantiate), unless the table's entries are constants
// reached only through call_indirect: it is the one table, not exported
// (the form refuses an imported one), its segments active lists of
// function indices within its bounds, with no import among them, and no
// code reads it otherwise (table.get, table.size).
func planDirectCalls(m *snapshotModule, sections []wasmbin.Section) (*directCalls, error) {
	d := &directCalls{indirect: map[uint32]uint32{}}
	var code, elems []byte
	tables := 0
	for _, s := range sections {
		var err error
		switch s.ID {
		case wasmbin.SectionImport:
			err = forEachImport(s.Payload, func(_, _ string, kind byte, desc []byte) error {
				if kind == externFunc {
					t, err := wasmbin.NewReader(desc).U32()
					d.funcTypes = append(d.funcTypes, t)
					return err
				}
				return nil
			})
		case wasmbin.SectionFunction:
			err = d.readFunctions(s.Payload)
		case wasmbin.SectionTable:
			tables, err = d.readTable(s.Payload)
		case wasmbin.SectionExport:
			var exports []export
			exports, err = readExports(s.Payload)
			for _, e := range exports {
				if e.kind == externTable {
					return nil, nil
				}
			}
		case wasmbin.SectionElement:
			elems = s.Payload
		case wasmbin.SectionCode:
			code = s.Payload
		}
		if err != nil {
			return nil, err
		}
	}
	if tables != 1 {
		return nil, nil
	}
	if ok, err := d.readElements(elems, m.importedFuncs); !ok || err != nil {
		return nil, err
	}
	if ok, err := d.readCallSites(code, int(m.definedFuncs)); !ok || err != nil {
		return nil, err
	}
	return d, nil
}

func (d *directCalls) readFunctions(p []byte) error {
	r := wasmbin.NewReader(p)
	n, err := r.Count(1)
	if err != nil {
		return fmt.Errorf("function section: %w", err)
	}
	for range n {
		t, err := r.U32()
		if err != nil {
			return fmt.Errorf("function section: %w", err)
		}
		d.funcTypes = append(d.funcTypes, t)
	}
	return nil
}

// readTable reads the table section's count and the first table's
// minimum size, which is the table's size: the module never grows it. A
// table of another kind, or with an initializer, counts as none.
func (d *directCalls) readTable(p []byte) (int, error) {
	r := wasmbin.NewReader(p)
	n, err := r.Count(3)
	if err != nil || n == 0 {
		return int(n), err
	}
	typ, err := r.Byte()
	if err != nil {
		return 0, fmt.Errorf("table 0: %w", err)
	}
	if typ != refFunc {
		return 0, nil
	}
	if _, err := r.Byte(); err != nil { // limits flags
		return 0, fmt.Errorf("table 0: %w", err)
	}
	d.tableMin, err = r.U32()
	return int(n), err
}

// readElements fills the slots from the element segments, which must be
// active, of function indices (flags 0, or 2 naming table 0), within the
// table's minimum size, and hold no import; it reports whether they are.
func (d *directCalls) readElements(p []byte, imported uint32) (bool, error) {
	d.slots = make([]int64, d.tableMin)
	for i := range d.slots {
		d.slots[i] = -1
	}
	if p == nil {
		return true, nil
	}
	r := wasmbin.NewReader(p)
	n, err := r.Count(1)
	if err != nil {
		return false, fmt.Errorf("element section: %w", err)
	}
	for i := range n {
		flags, err := r.U32()
		if err != nil {
			return false, fmt.Errorf("element segment %d: %w", i, err)
		}
		if flags != 0 && flags != elemExplicitTable {
			return false, nil
		}
		if flags == elemExplicitTable {
			if table, err := r.U32(); err != nil || table != 0 {
				return false, fmt.Errorf("element segment %d: table %d: %w", i, table, err)
			}
		}
		offset, err := constOffset(r)
		if err != nil {
			return false, nil
		}
		if flags == elemExplicitTable {
			if kind, err := r.Byte(); err != nil || kind != 0 {
				return false, fmt.Errorf("element segment %d: kind %d: %w", i, kind, err)
			}
		}
		count, err := r.Count(1)
		if err != nil {
			return false, fmt.Errorf("element segment %d: %w", i, err)
		}
		if uint64(offset)+uint64(count) > uint64(len(d.slots)) {
			return false, nil
		}
		for j := range count {
			f, err := r.U32()
			if err != nil {
				return false, fmt.Errorf("element segment %d: %w", i, err)
			}
			if f < imported {
				return false, nil
			}
			d.slots[offset+j] = int64(f)
		}
	}
	return true, nil
}

// readCallSites learns the types call_indirect uses; it reports false if
// code reads the table otherwise.
func (d *directCalls) readCallSites(p []byte, defined int) (bool, error) {
	ok := true
	var in wasmbin.Instr
	err := forEachBody(p, defined, func(i int, body []byte) error {
		r := wasmbin.NewReader(body)
		if _, err := readLocals(r); err != nil {
			return fmt.Errorf("code entry %d: %w", i, err)
		}
		for r.Len() > 0 && ok {
			if err := r.ReadInstr(&in); err != nil {
				return fmt.Errorf("code entry %d: %w", i, err)
			}
			switch in.Op {
			case wasmbin.OpCallIndirect:
				if _, ok := d.indirect[in.Index]; !ok {
					d.indirect[in.Index] = 0 // numbered in emit
					d.types = append(d.types, in.Index)
				}
			case wasmbin.OpTableGet, wasmbin.OpTableSize:
				ok = false
			}
		}
		return nil
	})
	return ok, err
}

// assign numbers the dispatchers, from first, and returns the types they
// need appended to the type section, the first of which gets index
// nextType.
func (d *directCalls) assign(first, nextType uint32, types []funcType) (funcs []uint32, added [][]byte) {
	for k, t := range d.types {
		d.indirect[t] = first + uint32(k)
		ft := types[t]
		params := append(bytes.Clone(ft.params), valI32)
		idx, found := findType(types, params, ft.results)
		for a, b := range added {
			if bytes.Equal(b, encodeType(params, ft.results)) {
				idx, found = nextType+uint32(a), true
			}
		}
		if !found {
			idx = nextType + uint32(len(added))
			added = append(added, encodeType(params, ft.results))
		}
		funcs = append(funcs, idx)
	}
	return funcs, added
}

// rewriteCode replaces each call_indirect in the code section's bodies
// with a call of its type's dispatcher, and appends extra bodies.
func (d *directCalls) rewriteCode(p []byte, defined int, extra ...[]byte) ([]byte, error) {
	var bodies [][]byte
	var in wasmbin.Instr
	err := forEachBody(p, defined, func(i int, body []byte) error {
		r := wasmbin.NewReader(body)
		if _, err := readLocals(r); err != nil {
			return fmt.Errorf("code entry %d: %w", i, err)
		}
		out := make([]byte, 0, len(body)+8)
		from := 0
		for r.Len() > 0 {
			if err := r.ReadInstr(&in); err != nil {
				return fmt.Errorf("code entry %d: %w", i, err)
			}
			if in.Op == wasmbin.OpCallIndirect {
				out = append(out, body[from:in.Start]...)
				out = appendOp(out, wasmbin.OpCall, d.indirect[in.Index])
				from = in.End
			}
		}
		out = append(out, body[from:]...)
		bodies = append(bodies, append(wasmbin.AppendU32(nil, uint32(len(out))), out...))
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, uint32(len(bodies)+len(extra)))
	for _, b := range append(bodies, extra...) {
		out = append(out, b...)
	}
	return out, nil
}

// dispatchers are the code entries of the dispatchers, in the order of
// d.types.
func (d *directCalls) dispatchers(types []funcType) [][]byte {
	out := make([][]byte, len(d.types))
	for k, t := range d.types {
		out[k] = d.dispatcher(t, types)
	}
	return out
}

// dispatcher is the body of the dispatcher for type t, which takes t's
// parameters and the slot:
//
//	block $invalid
//	  block $fK-1 ... block $f0
//	    local.get $slot
//	    br_table (per slot: $fJ of its function, or $invalid)
//	  end  local.get 0..n-1  return_call f0
//	  ...
//	end
//	local.get 0..n  call_indirect t   ;; on the empty table: traps
func (d *directCalls) dispatcher(t uint32, types []funcType) []byte {
	want := types[t]
	nparams := uint32(len(want.params))
	var targets []int64 // the block of each function, by order of first slot
	block := map[int64]uint32{}
	labels := make([]uint32, len(d.slots))
	for i, f := range d.slots {
		if f < 0 || !sameType(types[d.funcTypes[f]], want) {
			labels[i] = ^uint32(0)
			continue
		}
		if _, ok := block[f]; !ok {
			block[f] = uint32(len(targets))
			targets = append(targets, f)
		}
		labels[i] = block[f]
	}
	invalid := uint32(len(targets))
	body := []byte{0} // no locals
	for range len(targets) + 1 {
		body = append(body, byte(wasmbin.OpBlock), 0x40)
	}
	body = appendOp(body, wasmbin.OpLocalGet, nparams)
	body = appendOp(body, wasmbin.OpBrTable, uint32(len(labels)))
	for _, l := range labels {
		body = wasmbin.AppendU32(body, min(l, invalid))
	}
	body = wasmbin.AppendU32(body, invalid)
	for _, f := range targets {
		body = append(body, byte(wasmbin.OpEnd))
		body = appendLocalGets(body, nparams)
		body = appendOp(body, wasmbin.OpReturnCall, uint32(f))
	}
	body = append(body, byte(wasmbin.OpEnd))
	body = appendLocalGets(body, nparams+1)
	body = appendOp(body, wasmbin.OpCallIndirect, t)
	body = append(body, 0, byte(wasmbin.OpEnd))
	return append(wasmbin.AppendU32(nil, uint32(len(body))), body...)
}

// emptyTable is the table section of a module whose calls are direct: the
// one table, kept for the dispatchers' trapping call_indirect, empty.
func emptyTable() []byte { return []byte{1, refFunc, 1, 0, 0} }

func appendLocalGets(body []byte, n uint32) []byte {
	for i := range n {
		body = appendOp(body, wasmbin.OpLocalGet, i)
	}
	return body
}

func sameType(a, b funcType) bool {
	return bytes.Equal(a.params, b.params) && bytes.Equal(a.results, b.results)
}

func findType(types []funcType, params, results []byte) (uint32, bool) {
	for i, t := range types {
		if sameType(t, funcType{params, results}) {
			return uint32(i), true
		}
	}
	return 0, false
}

// encodeType is the type section's encoding of a function type.
func encodeType(params, results []byte) []byte {
	b := append([]byte{0x60}, wasmbin.AppendU32(nil, uint32(len(params)))...)
	b = append(b, params...)
	b = wasmbin.AppendU32(b, uint32(len(results)))
	return append(b, results...)
}
