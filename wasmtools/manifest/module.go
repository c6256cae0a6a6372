package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/edgeaip/edgeaip/wasmtools/section"
)

// Source says where a module's manifest came from.
type Source string

// The values of Source.
const (
	Embedded Source = "embedded" // the module's aip.tool section
	Sidecar  Source = "sidecar"  // NAME.json beside NAME.wasm
)

// ErrNone means a module has no manifest: no aip.tool section and, when
// read from a file, no sidecar.
var ErrNone = errors.New("no manifest: no aip.tool section and no NAME.json beside the module")

// Module is a tool module with its manifest.
type Module struct {
	Wasm     []byte
	Manifest Manifest
	Source   Source
	// Path is the file the module is kept in, if any.
	Path string
}

// FromWasm reads the manifest embedded in wasm. It fails with ErrNone if
// there is none.
func FromWasm(wasm []byte) (Module, error) {
	payload, found, err := section.Custom(wasm, SectionName)
	if err != nil {
		return Module{}, fmt.Errorf("manifest: %w", err)
	}
	if !found {
		return Module{}, ErrNone
	}
	m, err := Parse(payload)
	if err != nil {
		return Module{}, fmt.Errorf("embedded %w", err)
	}
	return Module{Wasm: wasm, Manifest: m, Source: Embedded}, nil
}

// Load reads the module at path and its manifest: the embedded one if it
// has one, else the sidecar NAME.json beside it.
func Load(path string) (Module, error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return Module{}, err
	}
	mod, err := FromWasm(wasm)
	if !errors.Is(err, ErrNone) {
		mod.Path = path
		return mod, err
	}
	sidecar := strings.TrimSuffix(path, ".wasm") + ".json"
	b, err := os.ReadFile(sidecar)
	if errors.Is(err, fs.ErrNotExist) {
		return Module{}, ErrNone
	}
	if err != nil {
		return Module{}, err
	}
	m, err := Parse(b)
	if err != nil {
		return Module{}, fmt.Errorf("%s: %w", sidecar, err)
	}
	return Module{Wasm: wasm, Manifest: m, Source: Sidecar, Path: path}, nil
}

// Embed validates m and returns wasm with m in its aip.tool section,
// replacing any manifest it had.
func Embed(wasm []byte, m Manifest) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return section.WithCustom(wasm, SectionName, b)
}
