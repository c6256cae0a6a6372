package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"go/types"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// wireKind is how the fast path reads and writes a Go type.
type wireKind int

const (
	kindText    wireKind = iota // string, or a named string type without a list of its values
	kindEnum                    // a named string type with a package-level array of its values
	kindUint                    // uint32 or uint64
	kindInt                     // int64
	kindAny                     // any: a free-form value
	kindMap                     // map[string]any: a free-form map
	kindList                    // a slice
	kindStruct                  // a struct of the model, as a slice's element
	kindPointer                 // a pointer to a struct of the model
)

// supported says, for an error, which field types the generator handles.
const supported = "string, a named string type, uint32, uint64, int64, any, map[string]any, " +
	"a slice of these or of a struct, or a pointer to a struct"

// wireType is a field's type as the generated code handles it.
type wireType struct {
	kind   wireKind
	goType string    // as the package spells it
	known  string    // kindEnum: the array of its values
	elem   *wireType // kindList: the element; kindPointer: the struct
}

// omitRule is the omitempty and omitzero options of a field's tag.
type omitRule struct{ empty, zero bool }

type field struct {
	goName string
	key    string // the CBOR map key
	typ    *wireType
	omit   omitRule
}

// structType is one struct of the model, its fields in declaration order.
type structType struct {
	name   string
	fields []field
}

// model is what the generator writes code for.
type model struct {
	pkg     string
	roots   []*structType // the message types, as the command line names them
	structs []*structType // every struct reachable from them, in declaration order
}

// loadModel type-checks the package in dir, leaving out the generated
// file skip, and collects the structs reachable from roots.
func loadModel(dir, skip string, roots []string) (*model, error) {
	pkg, err := check(dir, skip)
	if err != nil {
		return nil, err
	}
	l := &loader{pkg: pkg, known: enumValues(pkg), structs: map[string]*structType{}, pos: map[string]token.Pos{}}
	m := &model{pkg: pkg.Name()}
	for _, name := range roots {
		st, err := l.structNamed(name)
		if err != nil {
			return nil, err
		}
		m.roots = append(m.roots, st)
	}
	for _, st := range l.structs {
		m.structs = append(m.structs, st)
	}
	slices.SortFunc(m.structs, func(a, b *structType) int { return cmp.Compare(l.pos[a.name], l.pos[b.name]) })
	return m, nil
}

// check type-checks the package's Go files but skip. Imports are stubbed
// out and type errors ignored: the model's structs use only the language's
// types and the package's own, so this sees them exactly, in milliseconds
// rather than the seconds that checking every import from source takes;
// and code that uses the generated file does not type-check without it,
// which is what is being regenerated. A field whose type cannot be
// resolved this way is reported by classify.
func check(dir, skip string) (*types.Package, error) {
	bp, err := build.ImportDir(dir, 0)
	if err != nil {
		return nil, fmt.Errorf("read package in %s: %w", dir, err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range bp.GoFiles {
		if name == skip {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parse: %w", err)
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: stubImporter{}, Error: func(error) {}}
	pkg, _ := conf.Check(bp.ImportPath, fset, files, nil)
	return pkg, nil
}

// stubImporter gives every import as an empty package.
type stubImporter struct{}

func (stubImporter) Import(importPath string) (*types.Package, error) {
	p := types.NewPackage(importPath, path.Base(importPath))
	p.MarkComplete()
	return p, nil
}

// enumValues maps each named type of the package that has a package-level
// array of its values (taskStatuses, ToolTypes, …) to that array's name.
// More than one such array makes the type ambiguous, and it is left out.
func enumValues(pkg *types.Package) map[*types.TypeName]string {
	known := map[*types.TypeName]string{}
	ambiguous := map[*types.TypeName]bool{}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		v, ok := scope.Lookup(name).(*types.Var)
		if !ok {
			continue
		}
		arr, ok := v.Type().(*types.Array)
		if !ok {
			continue
		}
		named, ok := types.Unalias(arr.Elem()).(*types.Named)
		if !ok {
			continue
		}
		if _, dup := known[named.Obj()]; dup {
			ambiguous[named.Obj()] = true
		}
		known[named.Obj()] = name
	}
	for tn := range ambiguous {
		delete(known, tn)
	}
	return known
}

// loader collects the model's structs as it classifies their fields.
type loader struct {
	pkg     *types.Package
	known   map[*types.TypeName]string
	structs map[string]*structType
	pos     map[string]token.Pos
}

// structNamed returns the struct type the package declares as name,
// loading it and every struct its fields reach.
func (l *loader) structNamed(name string) (*structType, error) {
	if st, ok := l.structs[name]; ok {
		return st, nil
	}
	tn, ok := l.pkg.Scope().Lookup(name).(*types.TypeName)
	if !ok {
		return nil, fmt.Errorf("package %s declares no type %s", l.pkg.Name(), name)
	}
	s, ok := tn.Type().Underlying().(*types.Struct)
	if !ok {
		return nil, fmt.Errorf("%s.%s is not a struct", l.pkg.Name(), name)
	}
	st := &structType{name: name}
	l.structs[name] = st // before the fields, so a cycle ends here
	l.pos[name] = tn.Pos()
	for i := range s.NumFields() {
		f, ok, err := l.field(s.Field(i), s.Tag(i))
		if err != nil {
			return nil, fmt.Errorf("%s.%s.%s: %w", l.pkg.Name(), name, s.Field(i).Name(), err)
		}
		if ok {
			st.fields = append(st.fields, f)
		}
	}
	return st, checkFields(st)
}

// field reads one struct field as fxamacker/cbor does, and reports
// whether it is on the wire: unexported fields and "-" are not.
func (l *loader) field(v *types.Var, tag string) (field, bool, error) {
	if !v.Exported() {
		return field{}, false, nil
	}
	if v.Embedded() {
		return field{}, false, errors.New("embedded fields are not supported")
	}
	cborTag, ok := reflect.StructTag(tag).Lookup("cbor")
	if !ok {
		return field{}, false, errors.New(`no cbor tag: every wire field names its key, as in cbor:"key,omitempty"`)
	}
	if cborTag == "-" {
		return field{}, false, nil
	}
	key, opts, _ := strings.Cut(cborTag, ",")
	if key == "" {
		return field{}, false, fmt.Errorf("cbor tag %q names no key", cborTag)
	}
	f := field{goName: v.Name(), key: key}
	for opt := range strings.SplitSeq(opts, ",") {
		switch opt {
		case "":
		case "omitempty":
			f.omit.empty = true
		case "omitzero":
			f.omit.zero = true
		default:
			return field{}, false, fmt.Errorf("cbor tag option %q is not supported", opt)
		}
	}
	t, err := l.classify(v.Type())
	if err != nil {
		return field{}, false, err
	}
	if t.kind == kindStruct {
		return field{}, false, fmt.Errorf("type %s: a struct field must be a pointer or a slice", t.goType)
	}
	f.typ = t
	return f, true, nil
}

// classify says how the fast path handles t.
func (l *loader) classify(t types.Type) (*wireType, error) {
	switch t := types.Unalias(t).(type) {
	case *types.Basic:
		switch t.Kind() {
		case types.String:
			return &wireType{kind: kindText, goType: "string"}, nil
		case types.Uint32, types.Uint64:
			return &wireType{kind: kindUint, goType: t.Name()}, nil
		case types.Int64:
			return &wireType{kind: kindInt, goType: t.Name()}, nil
		}
	case *types.Named:
		if t.Obj().Pkg() != l.pkg || t.TypeArgs().Len() > 0 {
			break
		}
		switch u := t.Underlying().(type) {
		case *types.Basic:
			if u.Kind() != types.String {
				break
			}
			if known, ok := l.known[t.Obj()]; ok {
				return &wireType{kind: kindEnum, goType: t.Obj().Name(), known: known}, nil
			}
			return &wireType{kind: kindText, goType: t.Obj().Name()}, nil
		case *types.Struct:
			if _, err := l.structNamed(t.Obj().Name()); err != nil {
				return nil, err
			}
			return &wireType{kind: kindStruct, goType: t.Obj().Name()}, nil
		}
	case *types.Interface:
		if t.Empty() {
			return &wireType{kind: kindAny, goType: "any"}, nil
		}
	case *types.Map:
		k, kOK := types.Unalias(t.Key()).(*types.Basic)
		e, eOK := types.Unalias(t.Elem()).(*types.Interface)
		if kOK && k.Kind() == types.String && eOK && e.Empty() {
			return &wireType{kind: kindMap, goType: "map[string]any"}, nil
		}
	case *types.Slice:
		elem, err := l.classify(t.Elem())
		if err != nil {
			return nil, err
		}
		return &wireType{kind: kindList, goType: "[]" + elem.goType, elem: elem}, nil
	case *types.Pointer:
		elem, err := l.classify(t.Elem())
		if err != nil {
			return nil, err
		}
		if elem.kind == kindStruct {
			return &wireType{kind: kindPointer, goType: "*" + elem.goType, elem: elem}, nil
		}
	}
	return nil, fmt.Errorf("type %s is not supported; the fast path handles %s",
		types.TypeString(t, types.RelativeTo(l.pkg)), supported)
}

// checkFields refuses what the generated code cannot hold: two fields
// with one key, more fields than the decoder's bit set has bits, or than
// the one-byte map head the encoder reserves can count.
func checkFields(st *structType) error {
	const maxFields = 23
	if len(st.fields) > maxFields {
		return fmt.Errorf("%s has %d wire fields; the fast path takes at most %d", st.name, len(st.fields), maxFields)
	}
	seen := map[string]string{}
	for _, f := range st.fields {
		if other, dup := seen[f.key]; dup {
			return fmt.Errorf("%s: fields %s and %s both have the key %q", st.name, other, f.goName, f.key)
		}
		seen[f.key] = f.goName
	}
	return nil
}

// wireOrder returns the fields in the order Core Deterministic Encoding
// writes them: bytewise by their encoded key (RFC 8949 §4.2.1).
func wireOrder(fields []field) []field {
	out := slices.Clone(fields)
	slices.SortFunc(out, func(a, b field) int { return bytes.Compare(encodedKey(a.key), encodedKey(b.key)) })
	return out
}

// encodedKey is a text key as CBOR encodes it: the head, then the bytes.
func encodedKey(key string) []byte {
	n := uint64(len(key))
	var head []byte
	switch {
	case n < 24:
		head = []byte{0x60 | byte(n)}
	case n <= 0xff:
		head = []byte{0x78, byte(n)}
	case n <= 0xffff:
		head = []byte{0x79, byte(n >> 8), byte(n)}
	default:
		head = []byte{0x7a, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}
	}
	return append(head, key...)
}
