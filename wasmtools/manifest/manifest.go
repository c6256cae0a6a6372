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

// Parse decodes and validates a manifest. Unknown fields are errors, so a
// misspelt "capabilities" does not pass unnoticed.
func Parse(b []byte) (Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("manifest: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Manifest{}, fmt.Errorf("manifest: trailing data after the JSON object")
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// Validate checks every field; the error names the first wrong one.
func (m *Manifest) Validate() error {
	if !validName.MatchString(m.Name) {
		return fmt.Errorf("manifest: field \"name\": %q: want 1-64 of [A-Za-z0-9_-], not starting with '-'", m.Name)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("manifest of %q: "+format, append([]any{m.Name}, args...)...)
	}
	if m.ToolType != ToolTypeAction && m.ToolType != ToolTypeDataCollection {
		return fail("field \"tool_type\": want %s or %s, got %q", ToolTypeAction, ToolTypeDataCollection, m.ToolType)
	}
	if m.InputSchema == nil {
		return fail("field \"input_schema\": missing")
	}
	if m.InputSchema["type"] != "object" {
		return fail("field \"input_schema\": the parameters are a JSON object, so its \"type\" must be \"object\"")
	}
	if _, err := schema.Compile(m.InputSchema); err != nil {
		return fail("field \"input_schema\": %w", err)
	}
	if m.OutputSchema != nil {
		if _, err := schema.Compile(m.OutputSchema); err != nil {
			return fail("field \"output_schema\": %w", err)
		}
	}
	if err := m.Capabilities.validate(); err != nil {
		return fail("field \"capabilities\": %w", err)
	}
	switch m.Init {
	case "", InitSnapshot, InitSnapshotOrPlain, InitPlain:
	default:
		return fail("field \"init\": want %s, %s or %s, got %q", InitSnapshot, InitSnapshotOrPlain, InitPlain, m.Init)
	}
	return nil
}

func (c Capabilities) validate() error {
	seen := map[string]bool{}
	for i, d := range c.Dirs {
		if d.Path != AnyDir && (!path.IsAbs(d.Path) || path.Clean(d.Path) != d.Path) {
			return fmt.Errorf("dirs[%d]: path %q: want an absolute, clean path or %q", i, d.Path, AnyDir)
		}
		if d.Mode != ReadOnly && d.Mode != ReadWrite {
			return fmt.Errorf("dirs[%d]: mode %q: want ro or rw", i, d.Mode)
		}
		if seen[d.Path] {
			return fmt.Errorf("dirs[%d]: path %q: listed twice", i, d.Path)
		}
		seen[d.Path] = true
	}
	for i, k := range c.Env {
		if !validEnvKey.MatchString(k) {
			return fmt.Errorf("env[%d]: %q is not an environment variable name", i, k)
		}
		if seen["$"+k] {
			return fmt.Errorf("env[%d]: %q: listed twice", i, k)
		}
		seen["$"+k] = true
	}
	return nil
}
