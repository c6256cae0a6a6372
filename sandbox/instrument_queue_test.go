package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// invalidBody is a WASI command that passes Load's checks and fails
// wazero's validation, which instrumenting runs.
func invalidBody(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.TestdataTools(), "invalid", "invalid_body.wasm"))
	require.NoError(t, err)
	return b
}

// goTool is the example tool built from Go: some 3.7 MB, a quarter of a
// second to instrument.
func goTool(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(testenv.GoTool(t))
	require.NoError(t, err)
	return b
}

func TestReadyReportsWhyTheModuleCouldNotBeInstrumented(t *testing.T) {
	sb := newSandbox(t, NewConfig().WithCacheDir(t.TempDir()))
	ctx := context.Background()
	tool, err := sb.Load(ctx, Spec{Name: "bad", Wasm: invalidBody(t)})
	require.NoError(t, err, "the checks Load makes at once pass")

	err = tool.Ready(ctx)
	require.ErrorIs(t, err, ErrRefused)
	assert.ErrorContains(t, err, `tool "bad": module refused: instrument: invalid module`)
	res := sb.Call(ctx, tool, nil)
	require.ErrorIs(t, res.Err, ErrRefused, "a call fails with the same error")
	assert.Equal(t, err.Error(), res.Err.Error())
}

func TestACallBeforeInstrumentationEndsWaitsForItAndRuns(t *testing.T) {
	sb := newSandbox(t, NewConfig().WithCacheDir(t.TempDir()))
	ctx := context.Background()
	slow, err := sb.Load(ctx, Spec{Name: "hash_file_go", Wasm: goTool(t)})
	require.NoError(t, err)
	echo := load(t, sb, "echo", Limits{})
	require.ErrorIs(t, echo.Ready(canceled()), ErrCanceled, "echo waits behind the Go tool")

	res := sb.Call(ctx, echo, []byte("hi"))
	require.NoError(t, res.Err)
	assert.Equal(t, "hi", string(res.Stdout))
	require.NoError(t, slow.Ready(ctx), "modules are instrumented in Load order")
}

func TestAToolWhoseInstrumentedCopyIsCachedIsReadyAtOnce(t *testing.T) {
	cache := t.TempDir()
	ctx := context.Background()
	first := newSandbox(t, NewConfig().WithCacheDir(cache))
	require.NoError(t, load(t, first, "echo", Limits{}).Ready(ctx))
	require.NoError(t, first.Close(ctx))

	second := newSandbox(t, NewConfig().WithCacheDir(cache))
	assert.NoError(t, load(t, second, "echo", Limits{}).Ready(canceled()))
}

func TestCloseAbandonsTheModulesWaitingToBeInstrumented(t *testing.T) {
	ctx := context.Background()
	sb, err := New(ctx, NewConfig())
	require.NoError(t, err)
	wasm := goTool(t)
	var tools []*Tool
	for _, name := range []string{"first", "second", "third"} {
		tool, err := sb.Load(ctx, Spec{Name: name, Wasm: wasm})
		require.NoError(t, err)
		tools = append(tools, tool)
	}
	require.NoError(t, sb.Close(ctx), "Close returns, having waited for the module being instrumented")

	for _, tool := range tools {
		if err := tool.Ready(canceled()); err != nil {
			require.ErrorIs(t, err, ErrClosed, "Ready returns without waiting: %s", tool.Name())
		}
	}
	assert.ErrorIs(t, tools[2].Ready(ctx), ErrClosed, "the last in line was never instrumented")
	assert.ErrorIs(t, sb.Call(ctx, tools[2], nil).Err, ErrClosed)
	_, err = sb.Load(ctx, Spec{Name: "late", Wasm: fixture(t, "echo")})
	assert.ErrorIs(t, err, ErrClosed)
}

func TestAToolClosedBeforeItsTurnIsNotInstrumented(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	ctx := context.Background()
	slow, err := sb.Load(ctx, Spec{Name: "hash_file_go", Wasm: goTool(t)})
	require.NoError(t, err)
	echo := load(t, sb, "echo", Limits{})
	require.NoError(t, echo.Close(ctx))
	assert.ErrorIs(t, echo.Ready(ctx), ErrUnloaded)
	assert.NoError(t, slow.Ready(ctx))
}

// canceled is a context that has ended, to ask Ready whether a tool is
// ready without waiting.
func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// Preparing tools at start runs behind calls. Here the background is
// held by a tool whose initialization never ends until the sandbox
// closes, with another in line behind it: a call of the last tool loaded
// has its tool instrumented and initialized at once, beside them, and is
// served while they are still being prepared. The trace hears each stage.
func TestACallIsServedBeforeTheToolsLoadedBeforeItArePrepared(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	gate := Spec{Wasm: fixture(t, "reactor/initspin"), Limits: Limits{Timeout: time.Hour, Fuel: 1 << 62}}
	gate.Name = "first"
	first := loadSpec(t, sb, gate)
	gate.Name = "second"
	second := loadSpec(t, sb, gate)
	last := loadSpec(t, sb, Spec{Name: "last", Wasm: fixture(t, "reactor/state")})
	var seen []Preparation
	// Bounded only so that a call that waits behind the gate fails.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = WithPreparationTrace(ctx, func(p Preparation) { seen = append(seen, p) })

	res := sb.Call(ctx, last, nil)
	require.NoError(t, res.Err)
	assert.Equal(t, "AAC1", string(res.Stdout))
	assert.ErrorIs(t, first.Ready(canceled()), ErrCanceled, "the first is still being prepared")
	assert.ErrorIs(t, second.Ready(canceled()), ErrCanceled, "the second still waits")
	require.GreaterOrEqual(t, len(seen), 2, "a stage of the preparation, then its end: %v", seen)
	assert.Equal(t, "last", seen[0].Tool)
	assert.Equal(t, Preparation{Tool: "last", Stage: StageReady, Step: 3, Steps: 3}, seen[len(seen)-1])

	seen = nil
	require.NoError(t, sb.Call(ctx, last, nil).Err)
	assert.Empty(t, seen, "a prepared tool whose code is loaded has nothing to trace")
}

// Preparing at start runs behind calls, not beside them: while a call
// waits for its tool's preparation, the background starts no step of its
// own, so as not to share the board's CPU with it. Here the background
// has the Go tool's instrumenting in hand when the call claims initslow,
// whose initialization takes seconds; a tool loaded meanwhile still waits
// its turn when initslow is ready, and is prepared once the call is
// served.
func TestTheBackgroundStartsNothingWhileACallWaitsForItsTool(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	ctx := context.Background()
	_, err := sb.Load(ctx, Spec{Name: "hash_file_go", Wasm: goTool(t)})
	require.NoError(t, err)
	slow := loadSpec(t, sb, Spec{Name: "initslow", Wasm: fixture(t, "reactor/initslow"),
		Limits: Limits{Timeout: time.Hour, Fuel: 1 << 62}})
	var later *Tool
	var laterAtReady Stage
	ctx = WithPreparationTrace(ctx, func(p Preparation) {
		switch {
		case p.Stage == StageInitializing && later == nil:
			later = load(t, sb, "echo", Limits{})
		case p.Stage == StageReady && later != nil:
			laterAtReady, _ = later.progress()
		}
	})

	res := sb.Call(ctx, slow, nil)
	require.NoError(t, res.Err)
	require.NotNil(t, later, "initslow was initialized for the call")
	assert.Equal(t, StageQueued, laterAtReady, "the tool loaded while the call waited was left in line")
	assert.NoError(t, later.Ready(context.Background()), "and prepared once the call was served")
}
