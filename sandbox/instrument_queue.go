package sandbox

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
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

// Ready waits until t's module is instrumented for fuel, and returns why
// it could not be: an error wrapping ErrRefused, ErrUnloaded (t was closed
// first) or ErrClosed. A tool whose instrumented copy was in the cache is
// ready as soon as Load returns. If ctx ends first, the error wraps
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
		why := ErrCanceled
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			why = ErrTimeout
		}
		return fmt.Errorf("tool %q: %w while its module was being instrumented: %w", t.name, why, context.Cause(ctx))
	}
}

// becomeReady records how t's instrumentation ended and wakes whoever
// waits in Ready.
func (t *Tool) becomeReady(m meteredModule, err error) {
	t.metered, t.readyErr, t.pending = m, err, nil
	close(t.ready)
}

// enqueue puts t, whose module is t.pending, in line to be instrumented.
// Callers hold s.mu.
func (s *Sandbox) enqueue(t *Tool) {
	s.queue = append(s.queue, t)
	select {
	case s.queued <- struct{}{}:
	default:
	}
}

// instrumentQueued instruments the modules of loaded tools in the order
// they were loaded, one at a time: each takes a quarter of a second and
// tens of megabytes for a Go tool, and a board has little of either to
// spare. Once the sandbox closes, the module being instrumented is
// abandoned as soon as the meter looks at its context, and it and the
// rest fail with ErrClosed.
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
		t := s.nextQueued()
		if t == nil {
			return
		}
		if t.isClosed() {
			t.becomeReady(meteredModule{}, fmt.Errorf("tool %q: %w", t.name, ErrUnloaded))
			continue
		}
		m, err := s.instrument(ctx, t.pending, t.sha256)
		switch {
		case err != nil && ctx.Err() != nil:
			err = fmt.Errorf("tool %q: %w", t.name, ErrClosed)
		case err != nil:
			err = fmt.Errorf("tool %q: %w: %w", t.name, ErrRefused, err)
		}
		t.becomeReady(m, err)
		if s.queueEmpty() {
			// Instrumenting leaves tens of megabytes of garbage; hand it
			// back to the board before settling down.
			debug.FreeOSMemory()
		}
	}
}

// nextQueued takes the next tool to instrument, waiting for one; nil once
// the sandbox is closed, when it fails the tools still in line.
func (s *Sandbox) nextQueued() *Tool {
	for {
		s.mu.Lock()
		select {
		case <-s.stop:
			left := s.queue
			s.queue = nil
			s.mu.Unlock()
			for _, t := range left {
				t.becomeReady(meteredModule{}, fmt.Errorf("tool %q: %w", t.name, ErrClosed))
			}
			return nil
		default:
		}
		if len(s.queue) > 0 {
			t := s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return t
		}
		s.mu.Unlock()
		select {
		case <-s.stop:
		case <-s.queued:
		}
	}
}

func (s *Sandbox) queueEmpty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) == 0
}
