package manifest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/edgeaip/edgeaip/internal/problem"

	"github.com/edgeaip/edgeaip/internal/suggest"
)

// Problem is one thing wrong with a manifest: the field, by its path
// ("limits.timeout", "capabilities.dirs[0].mode"), its line in the JSON
// it was read from (0 when it was not read from JSON), and what is wrong.
type Problem = problem.Problem

// Error is every problem Parse or Validate found in a manifest, in the
// order of its fields.
type Error struct {
	// Name is the manifest's name, if it has a valid one.
	Name     string
	Problems []Problem
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	whose := "manifest"
	if e.Name != "" {
		whose = fmt.Sprintf("manifest of %q", e.Name)
	}
	return whose + ": " + strings.Join(lines, "; ")
}

// problems collects a manifest's problems; lines, if set, finds the line
// of a path.
type problems struct {
	list  []Problem
	lines map[string]int
}

// add records a problem at path, unless path has one already: a field
// that did not decode is not checked further.
func (ps *problems) add(path, format string, args ...any) {
	if slices.ContainsFunc(ps.list, func(p Problem) bool { return p.Path == path }) {
		return
	}
	ps.list = append(ps.list, Problem{Path: path, Line: ps.lines[path], Problem: fmt.Sprintf(format, args...)})
}

// err is the problems as an *Error of the manifest called name, or nil.
func (ps *problems) err(name string) error {
	if len(ps.list) == 0 {
		return nil
	}
	if !validName.MatchString(name) {
		name = ""
	}
	// In the order of the document; a problem with no line (a field
	// missing) last.
	slices.SortStableFunc(ps.list, func(a, b Problem) int {
		return cmp.Compare(lineOrLast(a.Line), lineOrLast(b.Line))
	})
	return &Error{Name: name, Problems: ps.list}
}

func lineOrLast(line int) int {
	if line == 0 {
		return math.MaxInt
	}
	return line
}

// lineIndex maps the path of each member and element of the JSON value doc
// to the line it starts on: "limits.timeout" → 7. doc must be valid JSON.
func lineIndex(doc []byte) map[string]int {
	idx := map[string]int{}
	dec := json.NewDecoder(bytes.NewReader(doc))
	lineAt := func(offset int64) int { return bytes.Count(doc[:offset], []byte("\n")) + 1 }
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			for dec.More() {
				key, err := dec.Token()
				if err != nil {
					return err
				}
				k := join(path, key.(string))
				idx[k] = lineAt(dec.InputOffset())
				if err := walk(k); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		case json.Delim('['):
			for i := 0; dec.More(); i++ {
				k := fmt.Sprintf("%s[%d]", path, i)
				// The element starts after the whitespace the offset is at.
				rest := doc[dec.InputOffset():]
				idx[k] = lineAt(dec.InputOffset() + int64(len(rest)-len(bytes.TrimLeft(rest, " \t\r\n,"))))
				if err := walk(k); err != nil {
					return err
				}
			}
			_, err = dec.Token()
		}
		return err
	}
	walk("")
	return idx
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// decodeStrict decodes the JSON object doc into the struct v points to, as
// far as it can: a member v has no field for, or whose value does not
// decode into its field, is a problem, and the rest is still decoded.
func decodeStrict(doc []byte, v any, ps *problems) {
	decodeValue(doc, reflect.ValueOf(v).Elem(), "", ps)
}

func decodeValue(doc []byte, v reflect.Value, path string, ps *problems) {
	_, custom := v.Addr().Interface().(json.Unmarshaler)
	switch {
	case v.Kind() == reflect.Struct && !custom:
		decodeObject(doc, v, path, ps)
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
		decodeList(doc, v, path, ps)
	default:
		if err := json.Unmarshal(doc, v.Addr().Interface()); err != nil {
			ps.add(path, "%s", typeProblem(err, doc))
		}
	}
}

func decodeObject(doc []byte, v reflect.Value, path string, ps *problems) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(doc, &members); err != nil || members == nil {
		ps.add(path, "want an object, got %s", kindOf(doc))
		return
	}
	fields := map[string]int{}
	var names []string
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		fields[name] = i
		names = append(names, name)
	}
	for _, k := range slices.Sorted(maps.Keys(members)) {
		i, known := fields[k]
		if !known {
			ps.add(join(path, k), "unknown field%s", suggest.DidYouMean(k, names))
			continue
		}
		decodeValue(members[k], v.Field(i), join(path, k), ps)
	}
}

func decodeList(doc []byte, v reflect.Value, path string, ps *problems) {
	var elems []json.RawMessage
	if err := json.Unmarshal(doc, &elems); err != nil {
		ps.add(path, "want an array, got %s", kindOf(doc))
		return
	}
	v.Set(reflect.MakeSlice(v.Type(), len(elems), len(elems)))
	for i, e := range elems {
		decodeValue(e, v.Index(i), fmt.Sprintf("%s[%d]", path, i), ps)
	}
}

// typeProblem says why doc does not decode: in JSON's terms, not Go's.
func typeProblem(err error, doc []byte) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("want %s, got %s", jsonKind(te.Type), kindOf(doc))
	}
	return err.Error()
}

// jsonKind names the JSON values a Go type takes.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64:
		return "a whole number"
	case reflect.Slice:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// kindOf names the JSON value doc.
func kindOf(doc []byte) string {
	switch b := bytes.TrimSpace(doc); {
	case len(b) == 0:
		return "nothing"
	case b[0] == '"':
		return "a string"
	case b[0] == '{':
		return "an object"
	case b[0] == '[':
		return "an array"
	case string(b) == "true" || string(b) == "false":
		return "a boolean"
	case string(b) == "null":
		return "null"
	}
	return "a number"
}

// syntaxProblem locates a JSON syntax error in doc.
func syntaxProblem(err error, doc []byte) Problem {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := bytes.Count(doc[:se.Offset], []byte("\n")) + 1
		col := int(se.Offset) - bytes.LastIndexByte(doc[:se.Offset], '\n') - 1
		return Problem{Line: line, Column: col, Problem: se.Error()}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return Problem{Line: bytes.Count(doc, []byte("\n")) + 1, Problem: "unexpected end of JSON: a { or [ is not closed"}
	}
	return Problem{Problem: err.Error()}
}
