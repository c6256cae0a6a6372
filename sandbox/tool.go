package sandbox

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/wasmtools/abi"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/edgeaip/edgeaip/wasmtools/schema"
	"github.com/tetratelabs/wazero"
)

// Tool is a loaded tool module, to be called any number of times. Its
// module is instrumented for fuel in the background unless the cache had
// it (Ready). Its code is compiled at its first call and dropped when it
// has been idle for the sandbox's unload time; the next call compiles it
// again, from the compile cache when there is one.
type Tool struct {
	sb        *Sandbox
	name      string
	sha256    string
	limits    Limits
	path      string // where the module can be read again; "" if nowhere
	validator *schema.Validator
	mounts    []Mount
	env       map[string]string
	form      abi.Form
	init      manifest.Init // what the manifest asks
	size      int           // of the module loaded, in bytes

	// ready is closed once the module is instrumented, or has failed to
	// be, and a snapshot tool initialized; metered, readyErr, start, snap
	// and fallback are set before.
	ready    chan struct{}
	metered  meteredModule
	readyErr error
	pending  []byte // the module, while it waits to be instrumented
	start    Start
	snap     *snapshot // for StartSnapshot
	fallback error     // why a tool that asked for a snapshot starts plainly
	// steps is how many steps preparing the tool takes (Preparation).
	steps int
	// blank keeps the regions of calls that start plainly, reset to
	// zeros for the next call; nil where regions are not kept (not Linux).
	blank *image

	mu       sync.Mutex
	stage    Stage                 // of its preparation, until ready
	staged   chan struct{}         // closed when stage changes
	code     wazero.CompiledModule // nil until compiled, and once unloaded
	lastUsed time.Time
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

// Start says how the tool's calls start. Until the tool is Ready, a tool
// that asked for a snapshot says StartSnapshot, though it may then start
// plainly (Initialization says why).
func (t *Tool) Start() Start { return t.start }

// Initialization is what initializing a snapshot tool took, once, when it
// was loaded; or why a tool that asked for a snapshot, and allowed the
// fallback, starts each call plainly instead.
type Initialization struct {
	// Usage is what initialization used; zero unless the tool starts from
	// a snapshot. A call's own usage does not include it.
	Usage Usage
	// Fallback, if not nil, wraps ErrNotSnapshottable and says why the
	// tool starts plainly.
	Fallback error
}

// Initialization reports how the tool was initialized, once it is Ready.
func (t *Tool) Initialization() Initialization {
	select {
	case <-t.ready:
	default:
		return Initialization{}
	}
	in := Initialization{Fallback: t.fallback}
	if t.snap != nil {
		in.Usage = t.snap.usage
	}
	return in
}

// snapshot is what t's calls start from, or nil if they start plainly.
// Read it once Ready.
func (t *Tool) snapshot() *snapshot {
	if t.start != StartSnapshot {
		return nil
	}
	return t.snap
}

// keepSnapshot makes sn the snapshot t's calls start from, unless t was
// closed and no call remains to use it, when it frees sn.
func (t *Tool) keepSnapshot(sn *snapshot) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed && t.inflight == 0 {
		sn.free()
		return false
	}
	t.snap = sn
	return true
}

// Close frees the tool's compiled code and snapshot once the calls running
// now have ended; later calls fail.
func (t *Tool) Close(ctx context.Context) error {
	t.sb.forget(t)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	if t.inflight == 0 {
		return t.releaseLocked(ctx)
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

// leave counts a call out, and frees the code and snapshot of a closed
// tool after its last call.
func (t *Tool) leave(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inflight--
	t.lastUsed = time.Now()
	if t.closed && t.inflight == 0 {
		t.releaseLocked(ctx)
	}
}

// releaseLocked frees what a closed tool holds.
func (t *Tool) releaseLocked(ctx context.Context) error {
	t.freeImages()
	return t.unloadLocked(ctx)
}

// freeImages frees the tool's snapshot and blank image, with their idle
// regions.
func (t *Tool) freeImages() {
	t.snap.free()
	if t.blank != nil {
		t.blank.free()
	}
}

// compiled returns the tool's code, compiling it in lane l if it is not
// loaded; it gives up if ctx ends while another compile holds l. Call it
// between enter and leave, which keep the code from being unloaded.
func (t *Tool) compiled(ctx context.Context, l lane) (wazero.CompiledModule, error) {
	if code := t.loadedCode(); code != nil {
		return code, nil
	}
	done, err := t.sb.compiles.enter(ctx, l)
	if err != nil {
		return nil, err
	}
	defer done()
	if code := t.loadedCode(); code != nil {
		return code, nil // another call compiled it meanwhile
	}
	code, err := t.sb.compile(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.code != nil {
		// The other lane compiled it too; wazero shares one copy.
		code.Close(ctx)
		return t.code, nil
	}
	t.code = code
	return code, nil
}

func (t *Tool) loadedCode() wazero.CompiledModule {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.code
}

// awaited reports whether a call is waiting for t, or running.
func (t *Tool) awaited() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.inflight > 0
}

func (t *Tool) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// unloadIfIdle drops the code of a tool no call has used since before,
// and reports whether it did.
func (t *Tool) unloadIfIdle(ctx context.Context, before time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inflight != 0 || !t.lastUsed.Before(before) || t.code == nil {
		return false
	}
	t.unloadLocked(ctx)
	return true
}

// unloadUnused drops t's code unless a call is running or waiting for it.
func (t *Tool) unloadUnused(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inflight == 0 {
		t.unloadLocked(ctx)
	}
}

// unloadLocked drops t's code, and its idle regions with it: an idle tool
// keeps its image, not the pages its last calls wrote.
func (t *Tool) unloadLocked(ctx context.Context) error {
	if t.code == nil {
		return nil
	}
	if t.snap != nil {
		t.snap.image.dropIdle()
	}
	if t.blank != nil {
		t.blank.dropIdle()
	}
	code := t.code
	t.code = nil
	return code.Close(ctx)
}

// loaded reports whether the tool's code is compiled, for tests.
func (t *Tool) loaded() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.code != nil
}

// unloadIdle drops the code of tools idle for the unload time, until the
// sandbox closes.
func (s *Sandbox) unloadIdle(ctx context.Context) {
	if s.cfg.unloadAfter < 0 {
		<-s.stop
		return
	}
	tick := time.NewTicker(max(s.cfg.unloadAfter/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-tick.C:
			freed := false
			for _, t := range s.loadedTools() {
				freed = t.unloadIfIdle(ctx, now.Add(-s.cfg.unloadAfter)) || freed
			}
			if freed {
				// wazero unmaps compiled code from a finalizer: without a
				// collection, freed code stays resident for minutes.
				debug.FreeOSMemory()
			}
		}
	}
}

func (s *Sandbox) loadedTools() []*Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	tools := make([]*Tool, 0, len(s.tools))
	for t := range s.tools {
		tools = append(tools, t)
	}
	return tools
}

func (s *Sandbox) forget(t *Tool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tools, t)
}
