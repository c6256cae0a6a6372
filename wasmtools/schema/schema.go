// Package schema checks a tool's parameters against the JSON Schema its
// manifest declares, and says which parameter is wrong and why.
//
// Schemas are compiled with github.com/santhosh-tekuri/jsonschema/v6
// (drafts 4 to 2020-12; 2020-12 unless the schema names another). A schema
// may not load anything from outside itself: an external $ref is a compile
// error, so a manifest cannot make its host read files or the network.
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// resourceURL names the schema being compiled; it never leaves the process.
const resourceURL = "mem:///input_schema.json"

var printer = message.NewPrinter(language.English)

// Validator checks JSON values against one compiled schema. It is safe for
// concurrent use.
type Validator struct {
	s *jsonschema.Schema
}

// Compile compiles doc, a JSON Schema as decoded by encoding/json.
func Compile(doc map[string]any) (*Validator, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no file, no network
	if err := c.AddResource(resourceURL, v); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	s, err := c.Compile(resourceURL)
	if err != nil {
		return nil, fmt.Errorf("schema: %s", strings.ReplaceAll(err.Error(), resourceURL, "input_schema"))
	}
	return &Validator{s: s}, nil
}

// Validate checks params, a JSON document. A failure is an *Error that
// names each wrong parameter.
func (v *Validator) Validate(params []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return &Error{Problems: []Problem{{Message: "not valid JSON: " + err.Error()}}}
	}
	err = v.s.Validate(doc)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return &Error{Problems: []Problem{{Message: err.Error()}}}
	}
	var e Error
	collect(ve, &e.Problems)
	slices.SortFunc(e.Problems, func(a, b Problem) int { return strings.Compare(a.Field, b.Field) })
	e.Problems = slices.Compact(e.Problems)
	return &e
}

// Problem is one thing wrong with the parameters.
type Problem struct {
	// Field is the parameter's path, its names joined with "." (array
	// indices are numbers); empty for the parameters object itself.
	Field   string
	Message string
}

// Error lists what is wrong with a set of parameters.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		if p.Field == "" {
			parts[i] = "parameters: " + p.Message
		} else {
			parts[i] = fmt.Sprintf("parameter %q: %s", p.Field, p.Message)
		}
	}
	return strings.Join(parts, "; ")
}

// collect turns the leaves of a validation error tree into Problems, with
// the field in each rather than in a JSON pointer.
func collect(ve *jsonschema.ValidationError, out *[]Problem) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collect(c, out)
		}
		return
	}
	at := ve.InstanceLocation
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		for _, name := range k.Missing {
			*out = append(*out, Problem{Field: field(at, name), Message: "missing (required)"})
		}
	case *kind.AdditionalProperties:
		for _, name := range k.Properties {
			*out = append(*out, Problem{Field: field(at, name), Message: "not allowed (additionalProperties is false)"})
		}
	case *kind.Type:
		*out = append(*out, Problem{Field: field(at, ""), Message: fmt.Sprintf("got %s, want %s", k.Got, strings.Join(k.Want, " or "))})
	default:
		*out = append(*out, Problem{Field: field(at, ""), Message: ve.ErrorKind.LocalizedString(printer)})
	}
}

func field(at []string, name string) string {
	parts := slices.Clone(at)
	if name != "" {
		parts = append(parts, name)
	}
	return strings.Join(parts, ".")
}
