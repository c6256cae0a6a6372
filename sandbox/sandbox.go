package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"sync"

	"github.com/edgeaip/edgeaip/wasmtools/abi"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/edgeaip/edgeaip/wasmtools/meter"
	"github.com/edgeaip/edgeaip/wasmtools/schema"
	"github.com/edgeaip/edgeaip/wasmtools/section"
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

	compiles    *compiling // one compile per lane at a time: each may take 150 MB
	links       sync.Mutex // see rootFS.links
	compiledDir string     // wazero's compile cache; "" for none
	imageDir    string     // where snapshot images are made (newImage); "" for none

	mu     sync.Mutex
	tools  map[*Tool]struct{} // loaded and not closed, for unloadIdle
	queue  []*Tool            // loaded, waiting to be instrumented, in Load order
	inits  []*Tool            // instrumented, waiting to be initialized (StartSnapshot)
	queued chan struct{}      // signalled when the background may take a tool: one joins the queue, or no call waits
	stop   chan struct{}      // closed by Close
	bg     sync.WaitGroup     // unloadIdle and instrumentQueued
	// waiting counts the calls waiting for their tool's preparation
	// (callWaits): the background starts no step while any do.
	waiting int
	// stepping counts the steps of preparation under way, the
	// background's and those calls claimed (stepEnded).
	stepping int

	// calls counts the calls under way, which Close ends (closing) and
	// waits for before it frees their memory.
	calls    sync.WaitGroup
	closing  context.Context
	endCalls context.CancelCauseFunc
}

// Spec is a tool to load: the module and what its calls may use.
type Spec struct {
	Name string
	Wasm []byte
	// Path, if set, is a file that holds Wasm. Compiling is left to a
	// tool's first call, from an instrumented copy in the compile cache;
	// should that copy be gone by then, the module is read from Path
	// again, if it is still the same module.
	Path string
	// InputSchema, if set, is the JSON Schema every call's parameters must
	// satisfy before the tool runs.
	InputSchema map[string]any
	// Requested are the limits the module asks for (its manifest's). A
	// module may ask for less than the sandbox defaults, not more: the
	// defaults are what the operator allows a tool that policy does not
	// name.
	Requested Limits
	// Limits are the operator's, from policy: they override the rest field
	// by field, the sandbox defaults included. Memory can never exceed the
	// sandbox's ceiling.
	Limits Limits
	// Mounts are the host directories the tool sees. Without mounts it
	// has no filesystem at all.
	Mounts []Mount
	// Env is the tool's whole environment.
	Env map[string]string
	// Init is how the manifest asks the calls of a reactor to start
	// (manifest.Init): empty for a snapshot.
	Init manifest.Init
}

// New builds a Sandbox. Close it to free compiled code.
func New(ctx context.Context, cfg Config) (*Sandbox, error) {
	cfg = cfg.orDefault()
	// Memory is limited per call by callMemory, not runtime-wide, so that
	// each tool can have its own limit. Deadlines are enforced by the fuel
	// meter's safepoints, not WithCloseOnContextDone, which costs 4-20x on
	// loops (wasmtools/meter/RATIONALE.md).
	rc := wazero.NewRuntimeConfig().WithCoreFeatures(meter.CoreFeatures)
	s := &Sandbox{cfg: cfg, adm: newAdmission(cfg.maxCalls, cfg.maxReservedMemory), compiles: newCompiling(),
		tools: map[*Tool]struct{}{}, queued: make(chan struct{}, 1), stop: make(chan struct{})}
	s.closing, s.endCalls = context.WithCancelCause(context.Background())
	if cfg.cacheDir != "" {
		dir, err := openCacheDir(cfg.cacheDir)
		if err != nil {
			return nil, err
		}
		s.compiledDir = filepath.Join(dir, "compiled")
		cache, err := wazero.NewCompilationCacheWithDir(s.compiledDir)
		if err != nil {
			return nil, fmt.Errorf("sandbox: compile cache %s: %w", dir, err)
		}
		s.cache, s.meteredDir, s.imageDir = cache, filepath.Join(dir, "metered"), dir
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
	bgCtx := context.WithoutCancel(ctx)
	s.bg.Go(func() { s.unloadIdle(bgCtx) })
	s.bg.Go(func() { s.instrumentQueued(bgCtx) })
	return s, nil
}

// Load prepares spec.Wasm as the tool spec.Name, with its schema, mounts,
// environment and limits. It checks at once all that is cheap to check:
// the module takes one of the ABI's forms (a WASI command, or a reactor),
// and fits its memory limit. Instrumenting it for fuel, which validates
// it, takes a quarter of a second for a Go tool, so unless the
// instrumented copy is in the cache already, the tool is instrumented in
// the background, one module at a time in Load order: Ready waits for it
// and says if it failed, and a call has it done at once (Tool.Prepare),
// waiting for it as it waits for compiling. A reactor that starts from a snapshot (Start) is then
// initialized, in the background too: its code is compiled for that, and
// dropped again afterwards when the compile cache can give it back fast.
// Otherwise compiling is left to the first call, and compiled code is
// dropped again when the tool stays idle (WithUnloadAfter): a Go tool's
// code is some 25 MB of memory, too much to hold for every tool a small
// board has.
func (s *Sandbox) Load(ctx context.Context, spec Spec) (*Tool, error) {
	t := &Tool{sb: s, name: spec.Name, path: spec.Path, mounts: spec.Mounts, env: maps.Clone(spec.Env), init: spec.Init,
		size: len(spec.Wasm), ready: make(chan struct{}), staged: make(chan struct{})}
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
	t.limits = spec.Requested.atMost(s.cfg.limits).overriddenBy(spec.Limits).orDefault(s.cfg.limits)
	t.limits.MemoryPages = min(t.limits.MemoryPages, s.cfg.limits.MemoryPages)
	if err := s.adm.admissible(t.limits.MemoryPages); err != nil {
		return fail(err)
	}
	form, err := checkModule(spec.Wasm, t.limits.MemoryPages)
	if err != nil {
		return fail(err)
	}
	if t.start, err = StartOf(form, spec.Init); err != nil {
		return fail(err)
	}
	t.form, t.steps = form, 2
	if t.start == StartSnapshot {
		t.steps = 3
	}
	sum := sha256.Sum256(spec.Wasm)
	t.sha256 = hex.EncodeToString(sum[:])
	// Without a path, a damaged copy could not be made again once the
	// module is dropped: it is checked now, while the module is at hand.
	m, cached := s.cachedInstrumented(t.sha256, spec.Path == "")
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stop:
		return fail(ErrClosed)
	default:
	}
	t.blank = newBlankImage() // before the background work can unload t
	if s.meteredDir != "" {
		s.noteLoad(t.sha256, spec.Path)
	}
	switch {
	case cached && t.start != StartSnapshot:
		t.becomeReady(m, nil)
	case cached:
		t.metered = m
		s.enqueue(t, true)
	default:
		t.pending = spec.Wasm
		s.enqueue(t, false)
	}
	s.tools[t] = struct{}{}
	return t, nil
}

// Close frees the sandbox and every tool it loaded. Calls under way end,
// canceled, and Close waits for them: their memory goes with the tools.
// If ctx ends first, Close frees nothing and says so.
func (s *Sandbox) Close(ctx context.Context) error {
	s.mu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.mu.Unlock()
	s.endCalls(ErrClosed)
	s.bg.Wait()
	if err := waitCtx(ctx, &s.calls); err != nil {
		return fmt.Errorf("sandbox: close: calls still under way: %w", err)
	}
	for _, t := range s.loadedTools() {
		t.freeImages()
	}
	err := s.rt.Close(ctx)
	if s.cache != nil {
		s.cache.Close(ctx)
	}
	return err
}

// checkModule refuses what could never run: a module of neither of the
// ABI's forms, or whose memory starts above the limit.
func checkModule(wasm []byte, limit uint32) (abi.Form, error) {
	form, err := abi.FormOf(wasm)
	if err != nil {
		return "", err
	}
	pages, err := section.MinMemoryPages(wasm)
	if err != nil {
		return "", err
	}
	if pages > uint64(limit) {
		return "", fmt.Errorf("memory starts at %d pages, above the limit of %d", pages, limit)
	}
	return form, nil
}

// checkMounts refuses mounts that could not work: a relative guest path or
// a host path that is not a directory.
func checkMounts(mounts []Mount) error {
	for _, m := range mounts {
		if !path.IsAbs(m.GuestPath) || path.Clean(m.GuestPath) != m.GuestPath {
			return fmt.Errorf("granted dir %s: guest path is not absolute and clean", m.GuestPath)
		}
		root, err := m.open()
		if err != nil {
			return fmt.Errorf("granted dir %s: host dir %s: %w", m.GuestPath, m.hostDir(), err)
		}
		root.Close()
	}
	return nil
}

// enterCall counts a call in, unless the sandbox is closed (ok false):
// callCtx, the call's context, ends when Close begins. Call leave once the
// call is done.
func (s *Sandbox) enterCall(ctx context.Context) (callCtx context.Context, leave func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stop:
		return ctx, nil, false
	default:
	}
	s.calls.Add(1)
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(s.closing, func() { cancel(context.Cause(s.closing)) })
	return ctx, func() {
		unhook()
		cancel(nil)
		s.calls.Done()
	}, true
}

// waitCtx waits for wg, or until ctx ends.
func waitCtx(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
