package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
	"github.com/edgeaip/edgeaip/wasmtools/schema"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Sandbox compiles and runs tool modules. It is safe for concurrent use.
type Sandbox struct {
	cfg        Config
	rt         wazero.Runtime
	cache      wazero.CompilationCache
	meteredDir string // where instrumented modules are kept; "" for none
	adm        *admission
}

// Spec is a tool to load: the module and what its calls may use.
type Spec struct {
	Name string
	Wasm []byte
	// InputSchema, if set, is the JSON Schema every call's parameters must
	// satisfy before the tool runs.
	InputSchema map[string]any
	// Limits override the sandbox defaults field by field; memory can
	// never exceed the sandbox's ceiling.
	Limits Limits
	// Mounts are the host directories the tool sees. Without mounts it
	// has no filesystem at all.
	Mounts []Mount
	// Env is the tool's whole environment.
	Env map[string]string
}

// Tool is a compiled tool module, ready to be called any number of times.
type Tool struct {
	name      string
	sha256    string
	limits    Limits
	mod       wazero.CompiledModule
	validator *schema.Validator
	mounts    []Mount
	env       map[string]string

	mu       sync.Mutex
	inflight int
	closed   bool
}

// Name is the tool's name.
func (t *Tool) Name() string { return t.name }

// SHA256 is the hex digest of the module bytes the tool was loaded from.
func (t *Tool) SHA256() string { return t.sha256 }

// Limits are the limits each call of the tool runs under.
func (t *Tool) Limits() Limits { return t.limits }

// Mounts are the directories the tool sees.
func (t *Tool) Mounts() []Mount { return t.mounts }

// EnvKeys are the names of the environment variables the tool sees,
// sorted.
func (t *Tool) EnvKeys() []string {
	keys := make([]string, 0, len(t.env))
	for k := range t.env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// New builds a Sandbox. Close it to free compiled code.
func New(ctx context.Context, cfg Config) (*Sandbox, error) {
	cfg = cfg.orDefault()
	// Memory is limited per call by callMemory, not runtime-wide, so that
	// each tool can have its own limit. Deadlines are enforced by the fuel
	// meter's safepoints, not WithCloseOnContextDone, which costs 4-20x on
	// loops (wasmtools/meter/RATIONALE.md).
	rc := wazero.NewRuntimeConfig()
	s := &Sandbox{cfg: cfg, adm: newAdmission(cfg.maxCalls, cfg.maxReservedMemory)}
	if cfg.cacheDir != "" {
		dir, err := openCacheDir(cfg.cacheDir)
		if err != nil {
			return nil, err
		}
		cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(dir, "compiled"))
		if err != nil {
			return nil, fmt.Errorf("sandbox: compile cache %s: %w", dir, err)
		}
		s.cache, s.meteredDir = cache, filepath.Join(dir, "metered")
		rc = rc.WithCompilationCache(cache)
	}
	s.rt = wazero.NewRuntimeWithConfig(ctx, rc)
	wctx := experimental.WithFunctionListenerFactory(ctx, escapeListenerFactory{})
	if _, err := wasi_snapshot_preview1.Instantiate(wctx, s.rt); err != nil {
		s.Close(ctx)
		return nil, fmt.Errorf("sandbox: instantiate WASI: %w", err)
	}
	if err := meter.Install(ctx, s.rt); err != nil {
		s.Close(ctx)
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	return s, nil
}

// Load compiles spec.Wasm as the tool spec.Name, with its schema, mounts,
// environment and limits.
func (s *Sandbox) Load(ctx context.Context, spec Spec) (*Tool, error) {
	t := &Tool{name: spec.Name, mounts: spec.Mounts, env: maps.Clone(spec.Env)}
	fail := func(err error) (*Tool, error) { return nil, fmt.Errorf("tool %q: %w", spec.Name, err) }
	if err := checkMounts(spec.Mounts); err != nil {
		return fail(err)
	}
	if spec.InputSchema != nil {
		v, err := schema.Compile(spec.InputSchema)
		if err != nil {
			return fail(fmt.Errorf("input_schema: %w", err))
		}
		t.validator = v
	}
	t.limits = spec.Limits.orDefault(s.cfg.limits)
	t.limits.MemoryPages = min(t.limits.MemoryPages, s.cfg.limits.MemoryPages)
	if err := s.adm.admissible(t.limits.MemoryPages); err != nil {
		return fail(err)
	}
	sum := sha256.Sum256(spec.Wasm)
	t.sha256 = hex.EncodeToString(sum[:])
	metered, err := s.instrument(ctx, spec.Wasm, t.sha256)
	if err != nil {
		return fail(err)
	}
	mod, err := s.rt.CompileModule(ctx, metered)
	if err != nil {
		return fail(fmt.Errorf("compile: %w", err))
	}
	if _, ok := mod.ExportedFunctions()["_start"]; !ok {
		mod.Close(ctx)
		return fail(fmt.Errorf("not a WASI command module: no _start export"))
	}
	if err := checkMinMemory(mod, t.limits.MemoryPages); err != nil {
		mod.Close(ctx)
		return fail(err)
	}
	t.mod = mod
	return t, nil
}

// Close frees the tool's compiled code once the calls running now have
// ended; later calls fail.
func (t *Tool) Close(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	if t.inflight == 0 {
		return t.mod.Close(ctx)
	}
	return nil
}

// enter counts a call in; it fails once the tool is closed.
func (t *Tool) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.inflight++
	return true
}

// leave counts a call out, and frees the code of a closed tool after its
// last call.
func (t *Tool) leave(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inflight--
	if t.closed && t.inflight == 0 {
		t.mod.Close(ctx)
	}
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

// checkMounts refuses mounts that could not work: a relative guest path or
// a host path that is not a directory.
func checkMounts(mounts []Mount) error {
	for _, m := range mounts {
		if !path.IsAbs(m.GuestPath) || path.Clean(m.GuestPath) != m.GuestPath {
			return fmt.Errorf("granted dir %s: guest path is not absolute and clean", m.GuestPath)
		}
		fi, err := os.Stat(m.HostPath)
		if err != nil {
			return fmt.Errorf("granted dir %s: %w", m.GuestPath, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("granted dir %s: host path %s is not a directory", m.GuestPath, m.HostPath)
		}
	}
	return nil
}
