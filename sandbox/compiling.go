package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/semaphore"
)

// lane says who a compile is for. Each lane compiles one module at a
// time, and the two run side by side: preparing a tool in the background
// compiles it from scratch on a fresh cache, seconds for a Go tool, and a
// call must not wait for that, whether its tool is ready or still being
// prepared for it (claim).
type lane int

const (
	callLane    lane = iota // a call, and the preparation of a tool a call waits for
	prepareLane             // a tool's initialization, in the background
)

func (l lane) String() string {
	if l == prepareLane {
		return "the compile of a tool being initialized"
	}
	return "another call's compile"
}

// compiling bounds the compiles under way, one per lane, and runs
// PruneCache's sweep of wazero's cache only while none is: what a compile
// writes there is not recorded as its module's until it ends.
type compiling struct {
	lanes [2]*semaphore.Weighted

	mu       sync.Mutex
	inFlight int
	sweep    func() error // PruneCache came during a compile; run when the last ends
}

func newCompiling() *compiling {
	return &compiling{lanes: [2]*semaphore.Weighted{semaphore.NewWeighted(1), semaphore.NewWeighted(1)}}
}

// errCompileWait is wrapped by a compile that never began: its context
// ended while another compile held its lane.
var errCompileWait = errors.New("still waiting")

// enter waits for l to be free, or for ctx to end. The returned done must
// be called when the compile ends.
func (c *compiling) enter(ctx context.Context, l lane) (done func(), err error) {
	if err := c.lanes[l].Acquire(ctx, 1); err != nil {
		return nil, fmt.Errorf("%w for %s to end", errCompileWait, l)
	}
	c.mu.Lock()
	c.inFlight++
	c.mu.Unlock()
	return func() {
		c.leave()
		c.lanes[l].Release(1)
	}, nil
}

// leave counts a compile out, and runs a sweep it held up, if it was the
// last under way. Errors of that sweep are dropped: the next PruneCache
// tries again.
func (c *compiling) leave() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight--
	if c.inFlight == 0 && c.sweep != nil {
		sweep := c.sweep
		c.sweep = nil
		sweep()
	}
}

// whenIdle runs sweep now if no compile is under way, none starting until
// it ends; otherwise the last compile to end runs it, and whenIdle
// returns nil at once.
func (c *compiling) whenIdle(sweep func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inFlight > 0 {
		c.sweep = sweep
		return nil
	}
	return sweep()
}
