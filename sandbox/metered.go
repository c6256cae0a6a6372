package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/edgeaip/edgeaip/internal/atomicfile"
	"github.com/edgeaip/edgeaip/wasmtools/meter"
	"github.com/tetratelabs/wazero"
)

// costModelDir names the cache directory of the current cost model. Code
// compiled under another model lives elsewhere and is never run.
var costModelDir = "cost-model-" + strings.ReplaceAll(meter.CostModelVersion, "/", "-")

// openCacheDir prepares DIR/cost-model-V, mode 0700: whoever can write
// there chooses the machine code this process runs.
func openCacheDir(dir string) (string, error) {
	sub := filepath.Join(dir, costModelDir)
	for _, d := range []string{dir, sub} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", fmt.Errorf("sandbox: compile cache: %w", err)
		}
		// MkdirAll leaves an existing directory's mode alone.
		if err := os.Chmod(d, 0o700); err != nil {
			return "", fmt.Errorf("sandbox: compile cache: %w", err)
		}
	}
	return sub, nil
}

// meteredModule is a module instrumented for fuel: on disk in the cache
// dir, or, without one, in memory.
type meteredModule struct {
	path  string
	bytes []byte
}

// instrument meters wasm for fuel. Instrumenting a Go tool takes a quarter
// of a second, most of it validating, so the result is kept under the
// module's digest and a later load finds it there: a module only ever gets
// there by passing Instrument's validation.
func (s *Sandbox) instrument(ctx context.Context, wasm []byte, sum string) (meteredModule, error) {
	var path string
	if s.meteredDir != "" {
		path = filepath.Join(s.meteredDir, sum+".wasm")
		if _, err := os.Stat(path); err == nil {
			return meteredModule{path: path}, nil
		}
	}
	metered, err := meter.Instrument(ctx, wasm, meter.Options{})
	if err != nil {
		return meteredModule{}, err // meter names itself: "instrument: ..."
	}
	if path != "" && atomicfile.Write(path, metered) == nil {
		return meteredModule{path: path}, nil
	}
	// Without a cache, or one that cannot be written, the module stays
	// in memory.
	return meteredModule{bytes: metered}, nil
}

// compile compiles a metered module. An entry of the cache that does not
// compile is removed, so that the next load instruments the module again.
func (s *Sandbox) compile(ctx context.Context, m meteredModule) (wazero.CompiledModule, error) {
	wasm := m.bytes
	if m.path != "" {
		b, err := os.ReadFile(m.path)
		if err != nil {
			return nil, fmt.Errorf("read instrumented module: %w", err)
		}
		wasm = b
	}
	code, err := s.rt.CompileModule(ctx, wasm)
	if err != nil && m.path != "" {
		os.Remove(m.path)
		return nil, fmt.Errorf("%w (the cached instrumented module was removed: reload the tool)", err)
	}
	return code, err
}

// sliceSize is the fuel between two safepoints: about 10 ms of guest work.
// wazero interprets on architectures it cannot compile for, tens of times
// slower per unit, so there the slice is smaller, for deadlines to be
// noticed as promptly. The fuel counted is the same either way.
func sliceSize() uint64 {
	switch runtime.GOARCH {
	case "amd64", "arm64":
		return meter.DefaultSliceSize
	}
	return meter.DefaultSliceSize / 50
}
