// Package manifest is a tool module's self-description: its name, version,
// parameters, the capabilities it asks for and its default limits. The
// manifest travels inside the module, as JSON in the custom section
// "aip.tool"; during development it may instead sit beside the module as
// NAME.json.
package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"regexp"

	"github.com/edgeaip/edgeaip/wasmtools/schema"
)

// SectionName is the custom section that holds the manifest.
const SectionName = "aip.tool"

// Tool types, as AIP names them.
const (
	ToolTypeAction         = "action"
	ToolTypeDataCollection = "data_collection"
)

// Manifest describes a tool module.
type Manifest struct {
	Name        string `json:"name"`
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	ToolType    string `json:"tool_type"`
	// InputSchema is the JSON Schema of the parameters: an object schema.
	InputSchema map[string]any `json:"input_schema"`
	// OutputSchema, if set, is the JSON Schema of the result.
	OutputSchema map[string]any `json:"output_schema,omitempty"`
	Capabilities Capabilities   `json:"capabilities,omitzero"`
	Limits       Limits         `json:"limits,omitzero"`
	// Init says how the calls of a module in the reactor form start. Empty
	// means InitSnapshot for a reactor; a command has only InitPlain.
	Init Init `json:"init,omitempty"`
}

// Init is how the calls of a tool start (package wasmtools/abi tells the
// forms apart).
type Init string

// The values of Init.
const (
	// InitSnapshot: the reactor is initialized once per loaded version,
	// and each call starts a fresh instance from a snapshot of its state
	// then. A module that cannot be snapshotted is refused at load.
	InitSnapshot Init = "snapshot"
	// InitSnapshotOrPlain is InitSnapshot, but a module that cannot be
	// snapshotted starts each call plainly instead.
	InitSnapshotOrPlain Init = "snapshot-or-plain"
	// InitPlain: each call instantiates the module and runs its
	// initialization, then the tool.
	InitPlain Init = "plain"
)

// Capabilities are what a tool asks to use. It gets at most these, and
// only as far as the operator's policy grants them.
type Capabilities struct {
	Dirs []Dir `json:"dirs,omitempty"`
	// Env lists the environment variables the tool reads.
	Env []string `json:"env,omitempty"`
}

// AnyDir, as a Dir's Path, asks for whatever directories the operator
// grants, at most in the Dir's mode: the form for general file tools.
const AnyDir = "*"

// Dir is a directory a tool asks for, by the path it uses inside the
// sandbox.
type Dir struct {
	// Path is an absolute, clean guest path, or AnyDir.
	Path string `json:"path"`
	Mode Mode   `json:"mode"`
}

// Mode is how a tool may use a directory.
type Mode string

// The values of Mode.
const (
	ReadOnly  Mode = "ro"
	ReadWrite Mode = "rw"
)

// Limits are a tool's default limits; the operator's policy may override
// each. Zero fields leave the agent's defaults.
type Limits struct {
	// Fuel bounds the instructions a call may execute, in the units of the
	// agent's cost model.
	Fuel    uint64   `json:"fuel,omitempty"`
	Timeout Duration `json:"timeout,omitzero"`
	Memory  ByteSize `json:"memory,omitzero"`
}

var (
	validName   = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$`)
	validEnvKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// Parse decodes and validates a manifest. It reports every problem at
// once, each with its field and line, in an *Error: unknown fields (a
// misspelt "capabilities" does not pass unnoticed), values of the wrong
// type and values out of bounds.
func Parse(b []byte) (Manifest, error) {
	var m Manifest
	var raw json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		return Manifest{}, &Error{Problems: []Problem{syntaxProblem(err, b)}}
	}
	ps := &problems{lines: lineIndex(b)}
	if _, err := dec.Token(); err != io.EOF {
		ps.list = append(ps.list, Problem{Line: bytes.Count(b[:dec.InputOffset()], []byte("\n")) + 1,
			Problem: "trailing data after the JSON object"})
	}
	decodeStrict(raw, &m, ps)
	m.check(ps)
	if err := ps.err(m.Name); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// Validate checks every field, and reports every problem in an *Error.
func (m *Manifest) Validate() error {
	ps := &problems{}
	m.check(ps)
	return ps.err(m.Name)
}

func (m *Manifest) check(ps *problems) {
	if !validName.MatchString(m.Name) {
		ps.add("name", "%q: want 1-64 of [A-Za-z0-9_-], not starting with '-'", m.Name)
	}
	switch m.ToolType {
	case ToolTypeAction, ToolTypeDataCollection:
	case "":
		ps.add("tool_type", "missing: want %s or %s", ToolTypeAction, ToolTypeDataCollection)
	default:
		ps.add("tool_type", "want %s or %s, got %q", ToolTypeAction, ToolTypeDataCollection, m.ToolType)
	}
	switch _, err := schema.Compile(m.InputSchema); {
	case m.InputSchema == nil:
		ps.add("input_schema", "missing")
	case m.InputSchema["type"] != "object":
		ps.add("input_schema", "the parameters are a JSON object, so its \"type\" must be \"object\"")
	case err != nil:
		ps.add("input_schema", "%v", err)
	}
	if m.OutputSchema != nil {
		if _, err := schema.Compile(m.OutputSchema); err != nil {
			ps.add("output_schema", "%v", err)
		}
	}
	m.Capabilities.check(ps)
	switch m.Init {
	case "", InitSnapshot, InitSnapshotOrPlain, InitPlain:
	default:
		ps.add("init", "want %s, %s or %s, got %q", InitSnapshot, InitSnapshotOrPlain, InitPlain, m.Init)
	}
}

func (c Capabilities) check(ps *problems) {
	seen := map[string]bool{}
	for i, d := range c.Dirs {
		at := fmt.Sprintf("capabilities.dirs[%d]", i)
		if d.Path != AnyDir && (!path.IsAbs(d.Path) || path.Clean(d.Path) != d.Path) {
			ps.add(at+".path", "%q: want an absolute, clean path or %q", d.Path, AnyDir)
		}
		if d.Mode != ReadOnly && d.Mode != ReadWrite {
			ps.add(at+".mode", "%q: want ro or rw", d.Mode)
		}
		if seen[d.Path] {
			ps.add(at+".path", "%q: listed twice", d.Path)
		}
		seen[d.Path] = true
	}
	for i, k := range c.Env {
		at := fmt.Sprintf("capabilities.env[%d]", i)
		if !validEnvKey.MatchString(k) {
			ps.add(at, "%q is not an environment variable name", k)
		}
		if seen["$"+k] {
			ps.add(at, "%q: listed twice", k)
		}
		seen["$"+k] = true
	}
}
