package sandbox

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/wasmtools/schema"
	"github.com/tetratelabs/wazero"
)

// Tool is a loaded tool module, ready to be called any number of times. Its
// code is compiled at its first call and dropped when it has been idle for
// the sandbox's unload time; the next call compiles it again, from the
// compile cache when there is one.
type Tool struct {
	sb        *Sandbox
	name      string
	sha256    string
	limits    Limits
	metered   meteredModule
	path      string // where the module can be read again; "" if nowhere
	validator *schema.Validator
	mounts    []Mount
	env       map[string]string

	mu       sync.Mutex
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

// Close frees the tool's compiled code once the calls running now have
// ended; later calls fail.
func (t *Tool) Close(ctx context.Context) error {
	t.sb.forget(t)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	if t.inflight == 0 {
		return t.unloadLocked(ctx)
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
	t.lastUsed = time.Now()
	if t.closed && t.inflight == 0 {
		t.unloadLocked(ctx)
	}
}

// compiled returns the tool's code, compiling it if it is not loaded. Call
// it between enter and leave, which keep the code from being unloaded.
func (t *Tool) compiled(ctx context.Context) (wazero.CompiledModule, error) {
	t.mu.Lock()
	code := t.code
	t.mu.Unlock()
	if code != nil {
		return code, nil
	}
	sb := t.sb
	sb.compileMu.Lock()
	defer sb.compileMu.Unlock()
	t.mu.Lock()
	code = t.code // another call may have compiled it meanwhile
	t.mu.Unlock()
	if code != nil {
		return code, nil
	}
	code, err := sb.compile(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("compile: %w", err)
	}
	t.mu.Lock()
	t.code = code
	t.mu.Unlock()
	return code, nil
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

func (t *Tool) unloadLocked(ctx context.Context) error {
	if t.code == nil {
		return nil
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
	defer close(s.done)
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
