package meter

import (
	"errors"
	"fmt"
	"strings"

	"github.com/edgeaip/edgeaip/wasmtools/meter/internal/wasmbin"
)

// ErrShiftNeedsMemory is ShiftCode's error for a module without a memory,
// which the stores it pads with need.
var ErrShiftNeedsMemory = errors.New("ShiftCode: the module has no memory")

// ShiftCode returns wasm with a function that is never called put before
// its first defined function. The function holds n stores, so that wazero's
// compiler, which lays out machine code in function order at 16-byte
// boundaries, places every later function further on, all by the same
// amount. n = 0 returns wasm unchanged. The function's type () -> () is
// appended to the type section, and the name section and DWARF are
// dropped, since function indices and code offsets move; the module
// otherwise behaves and consumes fuel as before
// (TestShiftedModulesBehaveLikeOriginal).
//
// With wazero v1.12 on amd64 the new function compiles to 60 + 68n bytes,
// so n = 2, 6 and 10 move the code by 208, 480 and 752 bytes: 16, 32 and
// 48 bytes past a 64-byte boundary. BenchmarkFuel uses those: where hot
// loops fall relative to cache lines, the decoded-instruction cache and
// the branch predictor moves a program's time by several percent, so a
// ratio measured at one placement measures that as much as the metering.
// Other architectures and wazero versions give other sizes.
func ShiftCode(wasm []byte, n int) ([]byte, error) {
	if n < 0 {
		return nil, fmt.Errorf("ShiftCode: n = %d, want n >= 0", n)
	}
	if n == 0 {
		return wasm, nil
	}
	sections, err := wasmbin.ReadSections(wasm)
	if err != nil {
		return nil, err
	}
	s := shifter{pad: n}
	out := wasmbin.AppendModuleHeader(nil)
	for _, sec := range sections {
		if sec.ID == wasmbin.SectionCustom && (sec.Name == "name" || strings.HasPrefix(sec.Name, ".debug_")) {
			continue
		}
		s.memory = s.memory || sec.ID == wasmbin.SectionMemory
		if sec.Payload, err = s.section(sec); err != nil {
			return nil, fmt.Errorf("section %d: %w", sec.ID, err)
		}
		out = wasmbin.AppendSection(out, sec)
	}
	if !s.memory {
		return nil, ErrShiftNeedsMemory
	}
	return out, nil
}

// shifter rewrites the sections of a module in file order: the type and
// import sections come before the function indices they decide.
type shifter struct {
	pad      int
	memory   bool   // the module defines or imports a memory
	imported uint32 // imported functions: the new function's index
	padType  uint32 // the type () -> () it gets, appended
}

func (s *shifter) remap(f uint32) (uint32, error) {
	if f >= s.imported {
		f++
	}
	return f, nil
}

func (s *shifter) section(sec wasmbin.Section) ([]byte, error) {
	switch sec.ID {
	case wasmbin.SectionType:
		return s.types(sec.Payload)
	case wasmbin.SectionImport:
		return sec.Payload, s.countImports(sec.Payload)
	case wasmbin.SectionFunction:
		return prependVecItem(sec.Payload, wasmbin.AppendU32(nil, s.padType))
	case wasmbin.SectionGlobal:
		return rewriteGlobals(sec.Payload, s.remap)
	case wasmbin.SectionExport:
		return s.exports(sec.Payload)
	case wasmbin.SectionStart:
		start, err := wasmbin.NewReader(sec.Payload).U32()
		if err != nil {
			return nil, err
		}
		start, _ = s.remap(start)
		return wasmbin.AppendU32(nil, start), nil
	case wasmbin.SectionElement:
		return rewriteElements(sec.Payload, s.remap)
	case wasmbin.SectionCode:
		return s.code(sec.Payload)
	}
	return sec.Payload, nil
}

func (s *shifter) types(p []byte) ([]byte, error) {
	n, err := wasmbin.NewReader(p).U32()
	if err != nil {
		return nil, err
	}
	s.padType = n
	return appendToVector(p, []byte{0x60, 0, 0})
}

func (s *shifter) countImports(p []byte) error {
	r := wasmbin.NewReader(p)
	n, err := r.U32()
	if err != nil {
		return err
	}
	for range n {
		if _, err := r.Name(); err != nil {
			return err
		}
		if _, err := r.Name(); err != nil {
			return err
		}
		kind, _, err := readImportDesc(r)
		if err != nil {
			return err
		}
		switch kind {
		case externFunc:
			s.imported++
		case externMemory:
			s.memory = true
		}
	}
	return nil
}

func (s *shifter) exports(p []byte) ([]byte, error) {
	exports, err := readExports(p)
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, uint32(len(exports)))
	for _, e := range exports {
		if e.kind == externFunc {
			e.index, _ = s.remap(e.index)
		}
		out = append(wasmbin.AppendName(out, e.name), e.kind)
		out = wasmbin.AppendU32(out, e.index)
	}
	return out, nil
}

// code prepends the new function's body and renumbers the functions that
// calls and ref.func name.
func (s *shifter) code(p []byte) ([]byte, error) {
	body := []byte{0} // no locals
	for range s.pad {
		body = append(body, byte(wasmbin.OpI32Const), 0, byte(wasmbin.OpI32Const), 0, 0x36, 2, 0) // i32.store
	}
	body = append(body, byte(wasmbin.OpEnd))
	r := wasmbin.NewReader(p)
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, n+1)
	out = wasmbin.AppendU32(out, uint32(len(body)))
	out = append(out, body...)
	for i := range n {
		size, err := r.U32()
		if err != nil {
			return nil, err
		}
		raw, err := r.Bytes(int(size))
		if err != nil {
			return nil, err
		}
		if body, err = s.body(raw); err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		out = wasmbin.AppendU32(out, uint32(len(body)))
		out = append(out, body...)
	}
	return out, nil
}

func (s *shifter) body(raw []byte) ([]byte, error) {
	r := wasmbin.NewReader(raw)
	if _, err := readLocals(r); err != nil {
		return nil, err
	}
	out := append([]byte(nil), raw[:r.Pos()]...)
	var in wasmbin.Instr
	for r.Len() > 0 {
		if err := r.ReadInstr(&in); err != nil {
			return nil, err
		}
		if in.Op == wasmbin.OpCall || in.Op == wasmbin.OpRefFunc {
			f, _ := s.remap(in.Index)
			out = appendOp(out, in.Op, f)
			continue
		}
		out = append(out, r.Slice(in.Start, in.End)...)
	}
	return out, nil
}

// prependVecItem puts an encoded item first in a vector.
func prependVecItem(vec, item []byte) ([]byte, error) {
	r := wasmbin.NewReader(vec)
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	out := append(wasmbin.AppendU32(nil, n+1), item...)
	return append(out, r.Rest()...), nil
}
