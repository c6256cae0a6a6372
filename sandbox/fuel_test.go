package sandbox

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEveryCallReportsTheFuelItUsed(t *testing.T) {
	sb := newSandbox(t, NewConfig().WithReproducible(true))
	tool := load(t, sb, "echo", Limits{})
	first := sb.Call(context.Background(), tool, []byte(`{"a":1}`))
	require.NoError(t, first.Err)
	assert.Positive(t, first.Usage.Fuel)
	again := sb.Call(context.Background(), tool, []byte(`{"a":1}`))
	assert.Equal(t, first.Usage.Fuel, again.Usage.Fuel, "the same call costs the same fuel")
	// echo moves up to 65000 bytes per read: more input, more rounds.
	longer := sb.Call(context.Background(), tool, []byte(`{"a":"`+strings.Repeat("x", 200_000)+`"}`))
	require.NoError(t, longer.Err)
	assert.Greater(t, longer.Usage.Fuel, first.Usage.Fuel, "more input, more work")
}

func TestASpinningToolRunsOutOfFuel(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	res := sb.Call(context.Background(), load(t, sb, "spin", Limits{Fuel: 1_000_000, Timeout: time.Minute}), nil)
	require.ErrorIs(t, res.Err, ErrOutOfFuel)
	assert.Regexp(t, `^tool "spin": out of fuel after \d+ units \(budget 1000000\)$`, res.Err.Error())
	assert.GreaterOrEqual(t, res.Usage.Fuel, uint64(1_000_000))
}

func TestRunawayRecursionFailsAtTheDepthLimit(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	res := sb.Call(context.Background(), load(t, sb, "recurse", Limits{}), nil)
	require.ErrorIs(t, res.Err, ErrCallDepth)
	assert.Contains(t, res.Err.Error(), "call depth exceeded: more than 1000 nested calls")
}

func TestASleepingToolIsWokenByItsDeadline(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	res := sb.Call(context.Background(), load(t, sb, "sleep", Limits{Timeout: 200 * time.Millisecond}), nil)
	require.ErrorIs(t, res.Err, ErrTimeout)
	assert.Less(t, res.Usage.Wall, 30*time.Second, "not the hour it asked for")
}

func TestReproducibleCallsSleepNotAtAll(t *testing.T) {
	sb := newSandbox(t, NewConfig().WithReproducible(true))
	res := sb.Call(context.Background(), load(t, sb, "sleep", Limits{Timeout: time.Minute}), nil)
	require.NoError(t, res.Err, "an hour of fake time passes at once")
}

// A guest that spins used to hold up Go's garbage collector, and every
// goroutine with it, until it stopped: wazero's compiled code has no
// safepoint of its own. The meter's safepoints let a collection finish
// while the guest is still spinning.
func TestTheGarbageCollectorRunsWhileAToolSpins(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	tool := load(t, sb, "spin", Limits{Timeout: 5 * time.Second, Fuel: 1 << 60})
	done := make(chan Result, 1)
	go func() { done <- sb.Call(context.Background(), tool, nil) }()
	require.Eventually(t, func() bool { return sb.adm.running.Load() == 1 }, 10*time.Second, time.Millisecond)
	for range 3 {
		runtime.GC()
	}
	select {
	case <-done:
		t.Fatal("the collections waited for the spinning tool to end")
	default:
	}
	assert.ErrorIs(t, (<-done).Err, ErrTimeout)
}

func TestATimeoutSaysWhoseDeadlineItWas(t *testing.T) {
	sb := newSandbox(t, NewConfig())
	tool := load(t, sb, "spin", Limits{Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res := sb.Call(ctx, tool, nil)
	require.ErrorIs(t, res.Err, ErrTimeout)
	assert.Contains(t, res.Err.Error(), "(the caller's deadline)")
	assert.NotContains(t, res.Err.Error(), "1m0s", "not the tool's own timeout, which did not fire")
}
