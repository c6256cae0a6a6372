package sandbox

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"

	"github.com/edgeaip/edgeaip/wasmtools/manifest"
)

// Errors a tool that is not ready wraps, for errors.Is.
var (
	// ErrRefused: the module passed Load's checks but could not be
	// instrumented (wazero refused it, or the cost model does not price
	// one of its instructions). The tool can never run.
	ErrRefused = errors.New("module refused")
	// ErrClosed: the sandbox was closed before the tool was ready.
	ErrClosed = errors.New("sandbox closed")
)

// Ready waits until t's module is instrumented for fuel and, if it starts
// from a snapshot, initialized, and returns why it could not be: an error
// wrapping ErrRefused (with ErrNotSnapshottable, for a snapshot that could
// not be taken), ErrUnloaded (t was closed first) or ErrClosed. A tool
// whose instrumented copy was in the cache, and that needs no snapshot,
// is ready as soon as Load returns. If ctx ends first, the error wraps
// ErrCanceled or ErrTimeout.
func (t *Tool) Ready(ctx context.Context) error {
	select {
	case <-t.ready:
		return t.readyErr
	default:
	}
	select {
	case <-t.ready:
		return t.readyErr
	case <-ctx.Done():
		return fmt.Errorf("tool %q: %w while its module was being prepared (instrumented, or initialized): %w", t.name, ctxEnded(ctx), context.Cause(ctx))
	}
}

// ctxEnded is ErrTimeout if ctx's deadline passed, else ErrCanceled.
func ctxEnded(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ErrTimeout
	}
	return ErrCanceled
}

// becomeReady records how t's preparation ended and wakes whoever waits
// in Ready.
func (t *Tool) becomeReady(m meteredModule, err error) {
	t.metered, t.readyErr, t.pending = m, err, nil
	close(t.ready)
}

// enqueue puts t, whose module is t.pending, in line to be instrumented,
// or, with init, t, whose module is instrumented, in line to be
// initialized. Callers hold s.mu.
func (s *Sandbox) enqueue(t *Tool, init bool) {
	if init {
		s.inits = append(s.inits, t)
	} else {
		s.queue = append(s.queue, t)
	}
	t.setStage(StageQueued)
	select {
	case s.queued <- struct{}{}:
	default:
	}
}

// instrumentQueued prepares the tools nobody waits for yet, in the
// background, one at a time: it instruments the modules of loaded tools
// in the order they were loaded: each takes a quarter of a second and
// tens of megabytes for a Go tool, and a board has little of either to
// spare. It initializes the tools that start from a snapshot once no
// module waits to be instrumented: initializing compiles the tool, which
// can take seconds on a fresh cache, and a module that cannot be
// instrumented should be refused without waiting for that. A tool a call
// waits for is not left to it (claim), and while a call waits, the
// background starts no step: the step it has in hand runs to its end,
// the next waits for the call (callWaits). Once the sandbox closes, the
// module being instrumented is abandoned as soon as the meter looks at
// its context, and it and the rest fail with ErrClosed.
func (s *Sandbox) instrumentQueued(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		t, init := s.nextQueued()
		if t == nil {
			return
		}
		more, err := s.prepareStep(ctx, t, init, prepareLane)
		if more {
			s.mu.Lock()
			s.enqueue(t, true)
			s.mu.Unlock()
		} else {
			t.becomeReady(t.metered, err)
		}
		s.stepEnded()
	}
}

// stepEnded counts a step of preparation out, the background's or a
// call's, and once none is under way or in line, hands the garbage back
// to the board: instrumenting and compiling leave tens of megabytes of
// it, and a board that settles down should not keep them. Whichever step
// ends last does it: when a call's preparation ended after the
// background's, the agent held 30-31 MiB at 60 s rather than 21.
func (s *Sandbox) stepEnded() {
	s.mu.Lock()
	s.stepping--
	settled := s.stepping == 0 && len(s.queue) == 0 && len(s.inits) == 0
	s.mu.Unlock()
	if settled {
		debug.FreeOSMemory()
	}
}

// prepareStep takes t one step on: it instruments its module, or, with
// init, initializes it, compiling in lane l. more: t is instrumented now,
// and starts from a snapshot, so initializing it is the next step.
func (s *Sandbox) prepareStep(ctx context.Context, t *Tool, init bool, l lane) (more bool, err error) {
	switch {
	case t.isClosed():
		return false, fmt.Errorf("tool %q: %w", t.name, ErrUnloaded)
	case init:
		t.setStage(StageInitializing)
		return false, s.prepareSnapshot(ctx, t, l)
	}
	t.setStage(StageInstrumenting)
	if err := s.instrumentPending(ctx, t); err != nil {
		return false, err
	}
	return t.start == StartSnapshot, nil
}

// claim takes t out of the background's line, if it waits there, and
// prepares it at once, on a goroutine of its own and in the calls' lane:
// a tool a call waits for goes before those loaded earlier, and does not
// wait for the one the background prepares meanwhile (a compile under way
// cannot be interrupted), save for a small module's instrumenting or
// compile in hand (compiling.prepareWork). A tool the background has in
// hand is left to it: that work is what the call needs.
func (s *Sandbox) claim(t *Tool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stop:
		return
	default:
	}
	init := false
	i := slices.Index(s.queue, t)
	if i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
	} else if i = slices.Index(s.inits, t); i >= 0 {
		s.inits, init = slices.Delete(s.inits, i, i+1), true
	} else {
		return
	}
	s.stepping++
	s.bg.Go(func() { s.prepareNow(t, init) })
}

// prepareNow prepares t, which a call claimed, to the end: until the
// sandbox closes.
func (s *Sandbox) prepareNow(t *Tool, init bool) {
	more, err := s.prepareStep(s.closing, t, init, callLane)
	if more {
		_, err = s.prepareStep(s.closing, t, true, callLane)
	}
	t.becomeReady(t.metered, err)
	s.stepEnded()
}

// instrumentPending instruments t's module, t.pending, into t.metered.
func (s *Sandbox) instrumentPending(ctx context.Context, t *Tool) error {
	done, err := s.compiles.prepareWork(ctx, t.size)
	if err != nil {
		return fmt.Errorf("tool %q: %w: %w", t.name, ErrClosed, err)
	}
	m, err := s.instrument(ctx, t.pending, t.sha256, t.form)
	done()
	switch {
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("tool %q: %w", t.name, ErrClosed)
	case err != nil:
		return fmt.Errorf("tool %q: %w: %w", t.name, ErrRefused, err)
	}
	t.metered, t.pending = m, nil
	return nil
}

// prepareSnapshot initializes t, compiling in lane l, and keeps the snapshot its calls start
// from. A tool that cannot be snapshotted is refused, or, if its manifest
// allows, starts plainly. Where the compile cache gives code back cheaply,
// the code compiled for initializing is dropped again unless a call waits
// for it: compiling it from the cache at the first call takes a tenth of
// a second, and an agent that starts with many tools would otherwise hold
// every one's code, some 25 MB for a Go tool, until it went idle.
func (s *Sandbox) prepareSnapshot(ctx context.Context, t *Tool, l lane) error {
	sn, err := s.takeInitSnapshot(ctx, t, l)
	if s.codeCached() {
		defer t.unloadUnused(ctx)
	}
	switch {
	case err == nil && !t.keepSnapshot(sn):
		return fmt.Errorf("tool %q: %w", t.name, ErrUnloaded)
	case err == nil:
		return nil
	case errors.Is(err, ErrNotSnapshottable) && t.init == manifest.InitSnapshotOrPlain:
		t.start, t.fallback = StartPlain, err
		return nil
	case errors.Is(err, ErrUnloaded):
		return fmt.Errorf("tool %q: %w", t.name, ErrUnloaded)
	case ctx.Err() != nil:
		return fmt.Errorf("tool %q: %w", t.name, ErrClosed)
	}
	return fmt.Errorf("tool %q: %w: initialization: %w", t.name, ErrRefused, err)
}

// nextQueued takes the next tool to instrument, or, when none is left,
// to initialize (init), the first in line. It waits for one, and for no
// call to wait for its tool's preparation; nil once the sandbox is
// closed, when it fails the tools still in line.
func (s *Sandbox) nextQueued() (t *Tool, init bool) {
	for {
		s.mu.Lock()
		select {
		case <-s.stop:
			left := append(s.queue, s.inits...)
			s.queue, s.inits = nil, nil
			s.mu.Unlock()
			for _, t := range left {
				t.becomeReady(meteredModule{}, fmt.Errorf("tool %q: %w", t.name, ErrClosed))
			}
			return nil, false
		default:
		}
		t, init := s.takeQueuedLocked()
		s.mu.Unlock()
		if t != nil {
			return t, init
		}
		select {
		case <-s.stop:
		case <-s.queued:
		}
	}
}

// takeQueuedLocked takes the first tool in line to be instrumented, or,
// when none is, to be initialized (init); nil if none is, or if a call
// waits for its tool's preparation (callWaits). Callers hold s.mu.
func (s *Sandbox) takeQueuedLocked() (t *Tool, init bool) {
	switch {
	case s.waiting > 0:
		return nil, false
	case len(s.queue) > 0:
		t = s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
	case len(s.inits) > 0:
		t = s.inits[0]
		s.inits[0] = nil
		s.inits, init = s.inits[1:], true
	default:
		return nil, false
	}
	s.stepping++
	return t, init
}

// callWaits counts a call in as waiting for its tool's preparation, and
// returns what counts it out: a first call on a fresh data dir pays for
// instrumenting and compiling its tool, and on a 2-core machine that took
// 74-119 ms in the agent (medians per stock tool) while the background
// prepared the other tools beside it, 54-75 ms once it waited
// (BENCHMARKS.md, issue 38).
func (s *Sandbox) callWaits() (done func()) {
	s.mu.Lock()
	s.waiting++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.waiting--; s.waiting == 0 {
			select {
			case s.queued <- struct{}{}:
			default:
			}
		}
	}
}

// codeCached says whether compiled code comes back from the compile cache
// cheaply: wazero compiles, and caches, on amd64 and arm64 only; it
// interprets elsewhere, and caches nothing.
func (s *Sandbox) codeCached() bool {
	return s.compiledDir != "" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64")
}
