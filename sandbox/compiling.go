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
	// small lets one small module's preparation work, instrumenting or
	// its initializing compile, run at a time, whichever lane it is in
	// (prepareWork).
	small *semaphore.Weighted

	mu       sync.Mutex
	inFlight int
	// working is how many modules are being instrumented or compiled
	// now, and mostWorking the most there ever were at once (for tests).
	working, mostWorking int
	sweep                func() error // PruneCache came during a compile; run when the last ends
}

func newCompiling() *compiling {
	return &compiling{lanes: [2]*semaphore.Weighted{semaphore.NewWeighted(1), semaphore.NewWeighted(1)},
		small: semaphore.NewWeighted(1)}
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

// smallModule is the largest module, in bytes, whose preparation work
// waits for another's (prepareWork): the bound for a stock tool.
// A bigger one, a Go tool of megabytes, takes seconds to compile, and
// neither waits for the other; its memory is not bounded anyway.
const smallModule = 256 << 10

// prepareWork waits, for the preparation work (instrumenting, or the
// compile that initializing needs) of a module of size bytes, until no
// other small module's is under way, or ctx ends. A call's tool is
// prepared at once, beside the background's step in hand (claim); two
// such works at once took the agent's peak over its first minute on a
// fresh data dir from a median of 30 MB to 37 MB with the stock tools
// (their live heaps add up), while waiting for the other's costs a call
// at most one small module's work, 35-70 ms here. What initializing runs of the
// tool's own code is not such work: it may take as long as the tool's
// timeout, and a call never waits for it. The returned done must be
// called when the work ends.
func (c *compiling) prepareWork(ctx context.Context, size int) (done func(), err error) {
	if size > smallModule {
		return func() {}, nil
	}
	if err := c.small.Acquire(ctx, 1); err != nil {
		return nil, fmt.Errorf("waiting for another tool's preparation: %w", err)
	}
	return func() { c.small.Release(1) }, nil
}

// work counts a module's instrumenting or compile in, whatever it is
// for; the returned done counts it out.
func (c *compiling) work() (done func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.working++
	c.mostWorking = max(c.mostWorking, c.working)
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.working--
	}
}
