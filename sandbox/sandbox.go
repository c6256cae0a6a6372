package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Sandbox compiles and runs tool modules. It is safe for concurrent use.
type Sandbox struct {
	cfg   Config
	rt    wazero.Runtime
	fs    wazero.FSConfig
	cache wazero.CompilationCache
}

// Tool is a compiled tool module, ready to be called any number of times.
type Tool struct {
	name   string
	sha256 string
	limits Limits
	mod    wazero.CompiledModule
}

// Name is the tool's name.
func (t *Tool) Name() string { return t.name }

// SHA256 is the hex digest of the module bytes the tool was loaded from.
func (t *Tool) SHA256() string { return t.sha256 }

// New builds a Sandbox. Close it to free compiled code.
func New(ctx context.Context, cfg Config) (*Sandbox, error) {
	if cfg.limits == (Limits{}) {
		cfg = cfg.WithLimits(Limits{})
	}
	// Memory is limited per call by callMemory, not runtime-wide, so that
	// each tool can have its own limit.
	rc := wazero.NewRuntimeConfig().WithCloseOnContextDone(true)
	s := &Sandbox{cfg: cfg}
	if cfg.cacheDir != "" {
		if err := os.MkdirAll(cfg.cacheDir, 0o700); err != nil {
			return nil, fmt.Errorf("sandbox: compile cache: %w", err)
		}
		cache, err := wazero.NewCompilationCacheWithDir(cfg.cacheDir)
		if err != nil {
			return nil, fmt.Errorf("sandbox: compile cache %s: %w", cfg.cacheDir, err)
		}
		s.cache = cache
		rc = rc.WithCompilationCache(cache)
	}
	s.rt = wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, s.rt); err != nil {
		s.rt.Close(ctx)
		return nil, fmt.Errorf("sandbox: instantiate WASI: %w", err)
	}
	s.fs = fsConfig(cfg.mounts)
	return s, nil
}

func fsConfig(mounts []Mount) wazero.FSConfig {
	fc := wazero.NewFSConfig()
	for _, m := range mounts {
		if m.ReadOnly {
			fc = fc.WithReadOnlyDirMount(m.HostPath, m.GuestPath)
		} else {
			fc = fc.WithDirMount(m.HostPath, m.GuestPath)
		}
	}
	return fc
}

// Load compiles wasm as the tool name. limits override the sandbox defaults
// field by field, but memory can never exceed the sandbox's ceiling.
func (s *Sandbox) Load(ctx context.Context, name string, wasm []byte, limits Limits) (*Tool, error) {
	mod, err := s.rt.CompileModule(ctx, wasm)
	if err != nil {
		return nil, fmt.Errorf("tool %q: compile: %w", name, err)
	}
	if _, ok := mod.ExportedFunctions()["_start"]; !ok {
		mod.Close(ctx)
		return nil, fmt.Errorf("tool %q: not a WASI command module: no _start export", name)
	}
	limits = limits.orDefault(s.cfg.limits)
	limits.MemoryPages = min(limits.MemoryPages, s.cfg.limits.MemoryPages)
	if err := checkMinMemory(mod, limits.MemoryPages); err != nil {
		mod.Close(ctx)
		return nil, fmt.Errorf("tool %q: %w", name, err)
	}
	sum := sha256.Sum256(wasm)
	return &Tool{name: name, sha256: hex.EncodeToString(sum[:]), limits: limits, mod: mod}, nil
}

// Close frees the sandbox and every tool it loaded.
func (s *Sandbox) Close(ctx context.Context) error {
	err := s.rt.Close(ctx)
	if s.cache != nil {
		s.cache.Close(ctx)
	}
	return err
}

// checkMinMemory refuses a module whose memory starts above the limit: it
// could never be instantiated.
func checkMinMemory(mod wazero.CompiledModule, limit uint32) error {
	for _, m := range mod.ExportedMemories() {
		if m.Min() > limit {
			return fmt.Errorf("memory starts at %d pages, above the limit of %d", m.Min(), limit)
		}
	}
	return nil
}
