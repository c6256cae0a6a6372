package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgeaip/edgeaip/internal/atomicfile"
	"github.com/edgeaip/edgeaip/wasmtools/abi"
	"github.com/edgeaip/edgeaip/wasmtools/meter"
	"github.com/edgeaip/edgeaip/wasmtools/section"
	"github.com/tetratelabs/wazero"
)

// meteredModule is a module instrumented for fuel: on disk in the cache
// dir, or, without one, in memory.
type meteredModule struct {
	path  string
	bytes []byte
}

// instrument meters wasm, a module of form, for fuel. Instrumenting a Go
// tool takes a quarter of a second, most of it validating, so the result
// is kept under the module's digest and a later load finds it there: a
// module only ever gets there by passing Instrument's validation. It is
// written whole or not at all, and sealed with its own digest, so that a
// copy damaged on disk is never compiled.
func (s *Sandbox) instrument(ctx context.Context, wasm []byte, sum string, form abi.Form) (meteredModule, error) {
	if m, ok := s.cachedInstrumented(sum, true); ok {
		return m, nil
	}
	done := s.compiles.work()
	metered, err := instrumentForm(ctx, wasm, form)
	done()
	if err != nil {
		return meteredModule{}, err // meter names itself: "instrument: ..."
	}
	if s.meteredDir != "" {
		path := s.meteredPath(sum)
		if atomicfile.Write(path, seal(metered)) == nil {
			return meteredModule{path: path}, nil
		}
	}
	// Without a cache, or one that cannot be written, the module stays
	// in memory.
	return meteredModule{bytes: metered}, nil
}

// instrumentForm instruments a command as it is, and a reactor in the
// snapshot form, whether or not it will start from a snapshot: the form
// starts plainly too. A reactor the form cannot hold is instrumented as
// it is, with the reason in a custom section, so that a tool loaded from
// the cached copy can say why it cannot start from a snapshot.
func instrumentForm(ctx context.Context, wasm []byte, form abi.Form) ([]byte, error) {
	if form == abi.Command {
		return meter.Instrument(ctx, wasm, meter.Options{})
	}
	metered, err := meter.InstrumentSnapshot(ctx, wasm, meter.Options{})
	if !errors.Is(err, meter.ErrNotSnapshottable) {
		return metered, err
	}
	plain, perr := meter.Instrument(ctx, wasm, meter.Options{})
	if perr != nil {
		return nil, perr
	}
	reason := strings.TrimPrefix(err.Error(), "instrument: "+meter.ErrNotSnapshottable.Error()+": ")
	return section.WithCustom(plain, plainReasonSection, []byte(reason))
}

// cachedInstrumented finds the instrumented copy of the module whose
// digest is sum in the cache. With check, it reads the copy and checks its
// seal, and removes a copy that fails; without, a damaged copy is found
// when it is compiled (meteredBytes).
func (s *Sandbox) cachedInstrumented(sum string, check bool) (meteredModule, bool) {
	if s.meteredDir == "" {
		return meteredModule{}, false
	}
	path := s.meteredPath(sum)
	var err error
	if check {
		_, err = readMetered(path)
	} else {
		_, err = os.Stat(path)
	}
	if err != nil {
		os.Remove(path)
		return meteredModule{}, false
	}
	return meteredModule{path: path}, true
}

// compile compiles t's metered module; callers hold a compile lane. A compile
// that fails with a compile cache is tried once more after the cache is
// reset: wazero fails every compile of a module whose cached code is
// damaged, and every compile once its cache directory has been removed.
func (s *Sandbox) compile(ctx context.Context, t *Tool) (wazero.CompiledModule, error) {
	wasm, err := s.meteredBytes(ctx, t)
	if err != nil {
		return nil, err
	}
	defer s.compiles.work()()
	code, err := s.compileRecorded(ctx, t.sha256, wasm)
	if err != nil && s.compiledDir != "" && s.resetCompileCache() == nil {
		code, err = s.compileRecorded(ctx, t.sha256, wasm)
	}
	return code, err
}

// compileRecorded compiles wasm, the instrumented module whose original's
// digest is sum, and records which entries of the compile cache hold its
// code, for PruneCache.
func (s *Sandbox) compileRecorded(ctx context.Context, sum string, wasm []byte) (wazero.CompiledModule, error) {
	if s.compiledDir == "" {
		return s.rt.CompileModule(ctx, wasm)
	}
	before := s.compiledFiles()
	code, err := s.rt.CompileModule(ctx, wasm)
	if err == nil {
		s.recordCompiled(sum, before)
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

// meteredBytes reads t's instrumented module. A cached copy that has gone,
// cannot be read or fails its seal is removed and made again from t.path,
// if that still holds the module t was loaded from: a bad copy left in
// place would fail the tool at every start.
func (s *Sandbox) meteredBytes(ctx context.Context, t *Tool) ([]byte, error) {
	if t.metered.path == "" {
		return t.metered.bytes, nil
	}
	b, err := readMetered(t.metered.path)
	if err == nil {
		return b, nil
	}
	os.Remove(t.metered.path)
	if t.path == "" {
		return nil, fmt.Errorf("%w: load the tool again to instrument it anew", err)
	}
	wasm, err := os.ReadFile(t.path)
	if err != nil {
		return nil, fmt.Errorf("instrumented module unusable, and the module with it: %w", err)
	}
	if sum := sha256.Sum256(wasm); hex.EncodeToString(sum[:]) != t.sha256 {
		return nil, fmt.Errorf("instrumented module unusable, and %s no longer holds the module loaded: load the tool again", t.path)
	}
	m, err := s.instrument(ctx, wasm, t.sha256, t.form)
	if err != nil {
		return nil, err
	}
	if m.path == "" {
		return m.bytes, nil
	}
	return readMetered(m.path)
}

// sliceSize is the fuel between two safepoints: a fiftieth of the
// meter's default, so that wazero's interpreter (on armv7 and riscv64,
// tens of times slower per unit than its compiler) still notices a
// deadline within milliseconds. It is the same on every architecture
// because a call that faults on memory reports the fuel counted at its
// last safepoint; the extra safepoints under the compiler cost nothing
// measurable (BENCHMARKS.md, "Fuel metering").
func sliceSize() uint64 { return meter.DefaultSliceSize / 50 }
