package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startSpin runs the spin fixture in the background under l and waits
// until it holds its admission. stop ends it and waits for it.
func startSpin(t *testing.T, sb *Sandbox, l Limits) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	tool := load(t, sb, "spin", l)
	go func() {
		defer close(done)
		sb.Call(ctx, tool, nil)
	}()
	require.Eventually(t, func() bool { return sb.adm.running.Load() == 1 }, 10*time.Second, time.Millisecond)
	return func() {
		cancel()
		<-done
	}
}

// compiled loads name under l and calls it once, so that it is compiled:
// a later call then waits for admission alone, not behind the compile of
// the spin that startSpin admits (calls compile one at a time), which
// under load can outlast the waits these tests measure.
func compiled(t *testing.T, sb *Sandbox, name string, l Limits) *Tool {
	t.Helper()
	tool := load(t, sb, name, l)
	require.NoError(t, sb.Call(context.Background(), tool, []byte(`{}`)).Err)
	return tool
}

func TestCallsBeyondTheSlotsQueueWithTheirDeadlineRunning(t *testing.T) {
	sb := newSandbox(t, NewConfig().WithMaxConcurrentCalls(1))
	echo := compiled(t, sb, "echo", Limits{Timeout: 100 * time.Millisecond})
	stop := startSpin(t, sb, Limits{Timeout: time.Minute})

	res := sb.Call(context.Background(), echo, []byte(`{}`))
	require.ErrorIs(t, res.Err, ErrTimeout)
	assert.EqualError(t, res.Err, `tool "echo": timed out after 100ms: still waiting for one of the 1 call slots, with 1 calls running`)
	assert.Zero(t, res.Usage.Wall, "it never ran")

	stop()
	res = sb.Call(context.Background(), load(t, sb, "echo", Limits{}), []byte(`{}`))
	require.NoError(t, res.Err, "the slot is free again")
}

func TestReservedMemoryIsBounded(t *testing.T) {
	sb := newSandbox(t, NewConfig().WithMaxConcurrentCalls(4).WithMaxReservedMemory(100*pageSize))
	echo := compiled(t, sb, "echo", Limits{Timeout: 100 * time.Millisecond, MemoryPages: 64})
	stop := startSpin(t, sb, Limits{Timeout: time.Minute, MemoryPages: 64})

	res := sb.Call(context.Background(), echo, []byte(`{}`))
	require.ErrorIs(t, res.Err, ErrTimeout)
	assert.Contains(t, res.Err.Error(), "still waiting for 4 MiB of the 6 MiB calls may reserve")

	res = sb.Call(context.Background(), load(t, sb, "echo", Limits{Timeout: 10 * time.Second, MemoryPages: 16}), []byte(`{}`))
	require.NoError(t, res.Err, "a call that fits beside the first runs at once")
	stop()
}

func TestALimitAboveTheTotalReserveIsRefusedAtLoad(t *testing.T) {
	sb := newSandbox(t, NewConfig().WithMaxReservedMemory(32*pageSize))
	_, err := sb.Load(context.Background(), Spec{Name: "echo", Wasm: fixture(t, "echo"), Limits: Limits{MemoryPages: 64}})
	assert.EqualError(t, err, `tool "echo": memory limit of 64 pages (4 MiB) is above the 2 MiB all running calls may reserve together`)
}

func TestCancelWhileQueuedIsACancellation(t *testing.T) {
	sb := newSandbox(t, NewConfig().WithMaxConcurrentCalls(1))
	echo := compiled(t, sb, "echo", Limits{})
	stop := startSpin(t, sb, Limits{Timeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	res := sb.Call(ctx, echo, []byte(`{}`))
	require.ErrorIs(t, res.Err, ErrCanceled)
	assert.Contains(t, res.Err.Error(), "still waiting for one of the 1 call slots")
	stop()
}
