package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
	if m, ok := s.cachedInstrumented(sum); ok {
		return m, nil
	}
	metered, err := meter.Instrument(ctx, wasm, meter.Options{})
	if err != nil {
		return meteredModule{}, err // meter names itself: "instrument: ..."
	}
	if s.meteredDir != "" {
		path := s.meteredPath(sum)
		if atomicfile.Write(path, metered) == nil {
			return meteredModule{path: path}, nil
		}
	}
	// Without a cache, or one that cannot be written, the module stays
	// in memory.
	return meteredModule{bytes: metered}, nil
}

// cachedInstrumented finds the instrumented copy of the module whose
// digest is sum in the cache.
func (s *Sandbox) cachedInstrumented(sum string) (meteredModule, bool) {
	if s.meteredDir == "" {
		return meteredModule{}, false
	}
	path := s.meteredPath(sum)
	if _, err := os.Stat(path); err != nil {
		return meteredModule{}, false
	}
	return meteredModule{path: path}, true
}

func (s *Sandbox) meteredPath(sum string) string { return filepath.Join(s.meteredDir, sum+".wasm") }

// compile compiles t's metered module; callers hold compileMu. A cached
// instrumented copy that has gone is made again from the module's file. A
// compile that fails with a compile cache is tried once more after the
// cache is reset: wazero fails every compile of a module whose cached code
// is damaged, and every compile once its cache directory has been removed.
func (s *Sandbox) compile(ctx context.Context, t *Tool) (wazero.CompiledModule, error) {
	wasm, err := s.meteredBytes(ctx, t)
	if err != nil {
		return nil, err
	}
	code, err := s.rt.CompileModule(ctx, wasm)
	if err != nil && s.compiledDir != "" && s.resetCompileCache() == nil {
		code, err = s.rt.CompileModule(ctx, wasm)
	}
	return code, err
}

// resetCompileCache empties wazero's compile cache and lays out its
// directories again, as opening a cache on the directory does.
func (s *Sandbox) resetCompileCache() error {
	if err := os.RemoveAll(s.compiledDir); err != nil {
		return err
	}
	if _, err := openCacheDir(filepath.Dir(filepath.Dir(s.compiledDir))); err != nil {
		return err
	}
	c, err := wazero.NewCompilationCacheWithDir(s.compiledDir)
	if err != nil {
		return err
	}
	return c.Close(context.Background())
}

// meteredBytes reads t's instrumented module, instrumenting it again from
// t.path if the cached copy is gone.
func (s *Sandbox) meteredBytes(ctx context.Context, t *Tool) ([]byte, error) {
	if t.metered.path == "" {
		return t.metered.bytes, nil
	}
	b, err := os.ReadFile(t.metered.path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) || t.path == "" {
		if err != nil {
			return nil, fmt.Errorf("read instrumented module: %w", err)
		}
		return b, nil
	}
	wasm, err := os.ReadFile(t.path)
	if err != nil {
		return nil, fmt.Errorf("instrumented module gone from the cache, and the module with it: %w", err)
	}
	if sum := sha256.Sum256(wasm); hex.EncodeToString(sum[:]) != t.sha256 {
		return nil, fmt.Errorf("instrumented module gone from the cache, and %s no longer holds the module loaded: load the tool again", t.path)
	}
	m, err := s.instrument(ctx, wasm, t.sha256)
	if err != nil {
		return nil, err
	}
	if m.path == "" {
		return m.bytes, nil
	}
	return os.ReadFile(m.path)
}

// sliceSize is the fuel between two safepoints: a fiftieth of the
// meter's default, so that wazero's interpreter (on armv7 and riscv64,
// tens of times slower per unit than its compiler) still notices a
// deadline within milliseconds. It is the same on every architecture
// because a call that faults on memory reports the fuel counted at its
// last safepoint; the extra safepoints under the compiler cost nothing
// measurable (BENCHMARKS.md, "Fuel metering").
func sliceSize() uint64 { return meter.DefaultSliceSize / 50 }
