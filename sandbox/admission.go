package sandbox

import (
	"context"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// admission bounds the calls that run at once, by count and by the memory
// they may reserve. Waiters are served in arrival order, so a large call is
// not starved by a stream of small ones.
type admission struct {
	slots     *semaphore.Weighted
	memory    *semaphore.Weighted
	maxCalls  int
	maxMemory uint64 // bytes
	running   atomic.Int64
}

func newAdmission(maxCalls int, maxMemory uint64) *admission {
	return &admission{
		slots:     semaphore.NewWeighted(int64(maxCalls)),
		memory:    semaphore.NewWeighted(int64(maxMemory)),
		maxCalls:  maxCalls,
		maxMemory: maxMemory,
	}
}

// admissible refuses a memory limit no call could ever reserve.
func (a *admission) admissible(pages uint32) error {
	if need := uint64(pages) * pageSize; need > a.maxMemory {
		return fmt.Errorf("memory limit of %d pages (%d MiB) is above the %d MiB all running calls may reserve together",
			pages, need>>20, a.maxMemory>>20)
	}
	return nil
}

// waitError says what a call was waiting for when its context ended.
type waitError struct {
	what    string
	running int64
}

func (e *waitError) Error() string {
	return fmt.Sprintf("still waiting for %s, with %d calls running", e.what, e.running)
}

// enter waits until the call may run and reserves pages of memory for it.
// The returned release must be called when the call ends.
func (a *admission) enter(ctx context.Context, pages uint32) (release func(), err error) {
	mem := int64(pages) * pageSize
	if err := a.slots.Acquire(ctx, 1); err != nil {
		return nil, &waitError{what: fmt.Sprintf("one of the %d call slots", a.maxCalls), running: a.running.Load()}
	}
	if err := a.memory.Acquire(ctx, mem); err != nil {
		a.slots.Release(1)
		return nil, &waitError{what: fmt.Sprintf("%d MiB of the %d MiB calls may reserve", mem>>20, a.maxMemory>>20), running: a.running.Load()}
	}
	a.running.Add(1)
	return func() {
		a.running.Add(-1)
		a.memory.Release(mem)
		a.slots.Release(1)
	}, nil
}
