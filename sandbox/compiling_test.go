package sandbox

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// heldCompile holds up wazero's compile of a module that exports export,
// from its beginning until release: wazero asks the listener factory in a
// compile's context for each function's listener before compiling any.
type heldCompile struct {
	export       string
	begun        chan struct{}
	began        sync.Once
	release      chan struct{}
	releasedOnce sync.Once
}

func holdCompileOf(t *testing.T, export string) *heldCompile {
	h := &heldCompile{export: export, begun: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(h.released)
	return h
}

func (h *heldCompile) in(ctx context.Context) context.Context {
	return experimental.WithFunctionListenerFactory(ctx, h)
}

func (h *heldCompile) released() { h.releasedOnce.Do(func() { close(h.release) }) }

// NewFunctionListener implements experimental.FunctionListenerFactory.
func (h *heldCompile) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	if slices.Contains(def.ExportNames(), h.export) {
		h.began.Do(func() { close(h.begun) })
		<-h.release
	}
	return nil
}

// waitFor fails t if ch stays empty for a minute: a call held behind a
// compile that never ends would otherwise hang the test.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("still waiting for %s", what)
		panic("unreachable")
	}
}

// newSandboxHoldingInitCompiles is a sandbox with a compile cache whose
// background holds up the compile that initializes a reactor, from its
// beginning until prep is released.
func newSandboxHoldingInitCompiles(t *testing.T) (sb *Sandbox, prep *heldCompile) {
	ctx := context.Background()
	prep = holdCompileOf(t, meter.SnapshotInitExport) // only the snapshot form exports it
	sb, err := New(prep.in(ctx), NewConfig().WithCacheDir(t.TempDir()))
	require.NoError(t, err)
	t.Cleanup(func() { sb.Close(ctx) })
	t.Cleanup(prep.released) // before Close, which waits for the background
	return sb, prep
}

func callAsync(ctx context.Context, sb *Sandbox, tool *Tool) <-chan Result {
	done := make(chan Result, 1)
	go func() { done <- sb.Call(ctx, tool, []byte(`{"a":1}`)) }()
	return done
}

// A reactor is compiled to be initialized in the background, from
// scratch on a fresh cache: seconds for a Go tool, more under load. A
// call of a tool that is ready meanwhile, and must be compiled too, does
// not wait for that compile (an agent's first command failed so, after
// SIGTERM's grace, saying it was waiting for a call slot).
func TestACallOfAReadyToolDoesNotWaitForAnotherToolsInitializingCompile(t *testing.T) {
	ctx := context.Background()
	sb, prep := newSandboxHoldingInitCompiles(t)

	echo := load(t, sb, "echo", Limits{})
	reactor := loadSpec(t, sb, Spec{Name: "state", Wasm: fixture(t, "reactor/state")})
	waitFor(t, prep.begun, "the reactor's compile to begin")
	require.NoError(t, echo.Ready(ctx))

	res := waitFor(t, callAsync(ctx, sb, echo), "the call, held behind the reactor's compile")
	require.NoError(t, res.Err)
	assert.Equal(t, `{"a":1}`, string(res.Stdout))

	prep.released()
	require.NoError(t, reactor.Ready(ctx))
	assert.NoError(t, sb.Call(ctx, reactor, []byte(`{}`)).Err)
}

// A call waits for another call's compile to end, outside its deadline,
// but not past its caller's context; and it says it was waiting for a
// compile, not for admission.
func TestACallWaitingForACompileEndsWithItsContext(t *testing.T) {
	ctx := context.Background()
	sb := newSandbox(t, NewConfig())
	echo, counter := load(t, sb, "echo", Limits{}), load(t, sb, "counter", Limits{})
	require.NoError(t, counter.Ready(ctx))
	first := holdCompileOf(t, "_start")
	compiling := callAsync(first.in(ctx), sb, echo)
	waitFor(t, first.begun, "the first call's compile to begin")

	waiting, cancel := context.WithCancelCause(ctx)
	second := callAsync(waiting, sb, counter)
	cancel(context.Canceled)
	res := waitFor(t, second, "the second call, canceled while the first compiled")
	require.ErrorIs(t, res.Err, ErrCanceled)
	assert.ErrorContains(t, res.Err, `tool "counter": canceled: context canceled: still waiting for another call's compile to end`)

	first.released()
	assert.NoError(t, waitFor(t, compiling, "the first call").Err)
}

// A call's tool is prepared at once, ahead of those loaded before it,
// but the work of preparing a small module (instrumenting it, compiling
// it) waits for the background's work in hand rather than run beside it:
// the two at once took the agent's peak over its first minute on a fresh
// data dir from a median of 30 MB to 37 MB with the stock tools. Here the
// background's compile of the first tool is held until the call for the
// second has claimed it.
func TestTheWorkOfPreparingSmallModulesRunsOneAtATime(t *testing.T) {
	ctx := context.Background()
	sb, prep := newSandboxHoldingInitCompiles(t)

	first := loadSpec(t, sb, Spec{Name: "state", Wasm: fixture(t, "reactor/state")})
	waitFor(t, prep.begun, "the background's compile of the first tool to begin")
	second := loadSpec(t, sb, Spec{Name: "echo", Wasm: fixture(t, "reactor/echo")})
	claimed := WithPreparationTrace(ctx, func(p Preparation) {
		if p.Stage == StageQueued {
			prep.released()
		}
	})

	res := waitFor(t, callAsync(claimed, sb, second), "the call of the second tool")
	require.NoError(t, res.Err)
	require.NoError(t, first.Ready(ctx))
	assert.NoError(t, sb.Call(ctx, first, []byte(`{}`)).Err)
	sb.compiles.mu.Lock()
	defer sb.compiles.mu.Unlock()
	assert.Equal(t, 1, sb.compiles.mostWorking, "one module was instrumented or compiled at a time")
}
