package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// paramSchema is a tool's compiled input schema. A nil *paramSchema accepts
// any parameters: a tool that declares no schema is not checked here.
type paramSchema struct {
	tool   string
	schema *jsonschema.Schema
}

// compileParamSchema compiles the JSON Schema a tool declares for its
// parameters. An empty schema gives nil, which accepts anything.
func compileParamSchema(tool string, schema map[string]any) (*paramSchema, error) {
	if len(schema) == 0 {
		return nil, nil
	}
	doc, err := jsonValue(schema)
	if err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", tool, err)
	}
	c := jsonschema.NewCompiler()
	const url = "tool-input.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", tool, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", tool, err)
	}
	return &paramSchema{tool: tool, schema: s}, nil
}

// check validates params against the schema. The error names the tool and
// each parameter at fault, e.g. `tool "get-sum": parameter "a": missing`.
func (p *paramSchema) check(params map[string]any) error {
	if p == nil {
		return nil
	}
	if params == nil {
		params = map[string]any{}
	}
	inst, err := jsonValue(params)
	if err != nil {
		return fmt.Errorf("tool %q: parameters: %w", p.tool, err)
	}
	err = p.schema.Validate(inst)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	var problems []string
	for _, leaf := range leafErrors(ve) {
		problems = append(problems, describe(leaf)...)
	}
	return fmt.Errorf("tool %q: %s", p.tool, strings.Join(dedupe(problems), "; "))
}

// jsonValue gives v the shape jsonschema expects (json.Number for numbers,
// map[string]any for objects), whatever decoder produced it: parameters
// arrive from CBOR as well as JSON.
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

func leafErrors(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leafErrors(c)...)
	}
	return out
}

var english = message.NewPrinter(language.English)

// describe says what is wrong in words that name the parameter.
func describe(e *jsonschema.ValidationError) []string {
	at := strings.Join(e.InstanceLocation, ".")
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		return qualified(at, k.Missing, "missing")
	case *kind.AdditionalProperties:
		return qualified(at, k.Properties, "not allowed")
	}
	msg := e.ErrorKind.LocalizedString(english)
	if at == "" {
		return []string{"parameters: " + msg}
	}
	return []string{fmt.Sprintf("parameter %q: %s", at, msg)}
}

// qualified names each property under the object at path.
func qualified(path string, props []string, problem string) []string {
	out := make([]string, len(props))
	for i, p := range props {
		if path != "" {
			p = path + "." + p
		}
		out[i] = fmt.Sprintf("parameter %q: %s", p, problem)
	}
	return out
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := in[:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
