package meter

import (
	"fmt"
	"math"
	"strings"

	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// rewriteSection returns s as it goes into the instrumented module; keep is
// false for sections that are dropped.
func (rw *rewriter) rewriteSection(s wasmbin.Section) (out wasmbin.Section, keep bool, err error) {
	var p []byte
	switch s.ID {
	case wasmbin.SectionCustom:
		return rw.rewriteCustom(s)
	case wasmbin.SectionType:
		p, err = appendToVector(s.Payload, rw.l.addedTypes...)
	case wasmbin.SectionImport:
		p, err = appendToVector(s.Payload, safepointImport(rw.l.safepointType))
	case wasmbin.SectionFunction:
		p, err = appendToVector(s.Payload, rw.twinFunctionEntries()...)
	case wasmbin.SectionGlobal:
		p, err = rewriteGlobals(s.Payload, rw.l.checkedRefFunc, counterGlobalEntry)
	case wasmbin.SectionExport:
		p, err = rw.rewriteExports(s.Payload)
	case wasmbin.SectionStart:
		p, err = rw.rewriteStart(s.Payload)
	case wasmbin.SectionElement:
		p, err = rewriteElements(s.Payload, rw.l.checkedRefFunc)
	case wasmbin.SectionCode:
		p, err = rw.rewriteCode(s.Payload)
	default:
		return s, true, nil
	}
	if err != nil {
		return s, false, err
	}
	return wasmbin.Section{ID: s.ID, Payload: p}, true, nil
}

// appendToVector adds encoded entries to the end of a vector.
func appendToVector(vec []byte, entries ...[]byte) ([]byte, error) {
	r := wasmbin.NewReader(vec)
	n, err := r.Count(1)
	if err != nil {
		return nil, err
	}
	total, err := vectorLen(n, len(entries))
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(make([]byte, 0, len(vec)+8*len(entries)+5), total)
	out = append(out, r.Rest()...)
	for _, e := range entries {
		out = append(out, e...)
	}
	return out, nil
}

// vectorLen is the length of a vector of n entries with extra ones added,
// which must stay a u32.
func vectorLen(n uint32, extra int) (uint32, error) {
	total := uint64(n) + uint64(extra)
	if total > math.MaxUint32 {
		return 0, fmt.Errorf("%d entries and %d added: too many", n, extra)
	}
	return uint32(total), nil
}

// twinFunctionEntries are the function section entries of the twins: the
// index of each one's type.
func (rw *rewriter) twinFunctionEntries() [][]byte {
	entries := make([][]byte, len(rw.l.funcTypes))
	for i, t := range rw.l.funcTypes {
		entries[i] = wasmbin.AppendU32(nil, rw.l.twinTypes[t])
	}
	return entries
}

func safepointImport(typeIndex uint32) []byte {
	b := wasmbin.AppendName(nil, HostModule)
	b = wasmbin.AppendName(b, SafepointFunc)
	b = append(b, externFunc)
	return wasmbin.AppendU32(b, typeIndex)
}

// rewriteGlobals copies the global section, passing ref.func indices in
// initializers through remap, and appends the extra encoded globals.
func rewriteGlobals(p []byte, remap func(uint32) (uint32, error), extra ...[]byte) ([]byte, error) {
	r := wasmbin.NewReader(p)
	n, err := r.Count(minGlobalSize)
	if err != nil {
		return nil, fmt.Errorf("global section: %w", err)
	}
	total, err := vectorLen(n, len(extra))
	if err != nil {
		return nil, fmt.Errorf("global section: %w", err)
	}
	out := wasmbin.AppendU32(make([]byte, 0, len(p)+16), total)
	for i := range n {
		typ, err := r.Bytes(2)
		if err != nil {
			return nil, fmt.Errorf("global %d: %w", i, err)
		}
		out = append(out, typ...)
		if out, err = wasmbin.AppendConstExpr(out, r, remap); err != nil {
			return nil, fmt.Errorf("global %d: %w", i, err)
		}
	}
	for _, g := range extra {
		out = append(out, g...)
	}
	return out, nil
}

// counterGlobalEntry is the appended global: the counter, a mutable i64.
// Its initial value does not matter: a Meter zeroes it the first time it
// sees the instance.
var counterGlobalEntry = []byte{valI64, 1, byte(wasmbin.OpI64Const), 0, byte(wasmbin.OpEnd)}

type export struct {
	name  string
	kind  byte
	index uint32
}

func readExports(p []byte) ([]export, error) {
	r := wasmbin.NewReader(p)
	n, err := r.Count(minExportSize)
	if err != nil {
		return nil, fmt.Errorf("export section: %w", err)
	}
	exports := make([]export, 0, n)
	for i := range n {
		var e export
		if e.name, err = r.Name(); err != nil {
			return nil, fmt.Errorf("export %d: %w", i, err)
		}
		if e.kind, err = r.Byte(); err != nil {
			return nil, fmt.Errorf("export %q: %w", e.name, err)
		}
		if e.index, err = r.U32(); err != nil {
			return nil, fmt.Errorf("export %q: %w", e.name, err)
		}
		exports = append(exports, e)
	}
	return exports, nil
}

func (rw *rewriter) rewriteExports(p []byte) ([]byte, error) {
	exports, err := readExports(p)
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(make([]byte, 0, len(p)+16), uint32(len(exports)+1))
	for _, e := range exports {
		if e.name == FuelExport {
			return nil, fmt.Errorf("export %q: the name is reserved for fuel metering", e.name)
		}
		if e.kind == externFunc {
			if err := rw.l.checkFunc(e.index); err != nil {
				return nil, fmt.Errorf("export %q: %w", e.name, err)
			}
			e.index = rw.l.remapFunc(e.index)
		}
		out = append(wasmbin.AppendName(out, e.name), e.kind)
		out = wasmbin.AppendU32(out, e.index)
	}
	out = append(wasmbin.AppendName(out, FuelExport), externGlobal)
	return wasmbin.AppendU32(out, rw.l.counterGlobal), nil
}

func (rw *rewriter) rewriteStart(p []byte) ([]byte, error) {
	f, err := readStart(rw.l, p)
	if err != nil {
		return nil, err
	}
	return wasmbin.AppendU32(nil, rw.l.remapFunc(f)), nil
}

// readStart reads the start function's index.
func readStart(l *layout, p []byte) (uint32, error) {
	f, err := wasmbin.NewReader(p).U32()
	if err == nil {
		err = l.checkFunc(f)
	}
	if err != nil {
		return 0, fmt.Errorf("start section: %w", err)
	}
	return f, nil
}

// rewriteCustom drops DWARF and source maps, whose code offsets the
// rewrite invalidates, remaps the name section, and keeps the rest as is.
func (rw *rewriter) rewriteCustom(s wasmbin.Section) (wasmbin.Section, bool, error) {
	switch {
	case strings.HasPrefix(s.Name, ".debug_"), s.Name == "sourceMappingURL", s.Name == "external_debug_info":
		return s, false, nil
	case s.Name == "name":
		p, err := rw.rewriteNames(s.Payload)
		if err != nil {
			return s, false, fmt.Errorf("name section: %w", err)
		}
		return wasmbin.Section{Name: s.Name, Payload: p}, true, nil
	}
	return s, true, nil
}
