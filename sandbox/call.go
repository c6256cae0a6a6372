package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"
)

// stderrTail is how much of stderr a failure carries.
const stderrTail = 1024

// Errors a failed call wraps, for errors.Is.
var (
	ErrTimeout = errors.New("timed out")
	// ErrOutOfFuel: the call executed more than its fuel budget.
	ErrOutOfFuel = errors.New("out of fuel")
	// ErrCallDepth: calls nested deeper than the instrumentation allows,
	// the same on every engine.
	ErrCallDepth    = errors.New("call depth exceeded")
	ErrExit         = errors.New("exited with status")
	ErrMemory       = errors.New("memory limit reached")
	ErrTrap         = errors.New("trapped")
	ErrOutputTooBig = errors.New("output too large")
	ErrCanceled     = errors.New("canceled")
	// ErrInvalidParams: the parameters do not satisfy the input schema;
	// the tool did not run.
	ErrInvalidParams = errors.New("invalid parameters")
	// ErrUnloaded: the tool was closed, e.g. replaced by a new version.
	ErrUnloaded = errors.New("unloaded")
)

// Result is the outcome of one call.
type Result struct {
	// Stdout is what the tool wrote: its result.
	Stdout []byte
	// Err is nil on success. Otherwise it wraps one of the Err* values and
	// says what happened, with the tail of stderr where there is one.
	Err   error
	Usage Usage
}

// Usage is what a call consumed.
type Usage struct {
	Fuel        uint64
	Wall        time.Duration
	MemoryPages uint32 // peak linear memory
	StdoutBytes int64
}

// Call runs t once in a fresh instance, with params (a JSON object) on
// stdin. Parameters that do not satisfy the tool's input schema fail the
// call before it runs. The call has the tool prepared at once if it
// still waits its turn (Tool.Prepare), and its code compiled if it is
// not loaded, neither of which counts against the call's deadline: the
// deadline bounds the tool, and instrumenting and compiling are the
// board's work. WithPreparationTrace hears how far along that is. A tool whose module
// was refused fails with ErrRefused. The call then waits for admission,
// its deadline already running. It never panics on a misbehaving module;
// every failure is in Result.Err.
func (s *Sandbox) Call(ctx context.Context, t *Tool, params []byte) Result {
	if t.validator != nil {
		if err := t.validator.Validate(params); err != nil {
			return Result{Err: fmt.Errorf("tool %q: %w: %w", t.name, ErrInvalidParams, err)}
		}
	}
	ctx, leave, ok := s.enterCall(ctx)
	if !ok {
		return Result{Err: fmt.Errorf("tool %q: %w", t.name, ErrClosed)}
	}
	defer leave()
	// A call counts in while it waits, so that code compiled to
	// initialize the tool is kept for it.
	if !t.enter() {
		return Result{Err: fmt.Errorf("tool %q: %w", t.name, ErrUnloaded)}
	}
	defer t.leave(context.WithoutCancel(ctx))
	code, err := t.prepareForCall(ctx)
	if err != nil {
		return Result{Err: err}
	}
	ctx = withDeadlineOf(ctx, t.limits.Timeout)
	ctx, cancelTimeout := context.WithTimeout(ctx, t.limits.Timeout)
	defer cancelTimeout()
	release, err := s.adm.enter(ctx, t.limits.MemoryPages)
	if err != nil {
		return Result{Err: fmt.Errorf("tool %q: %w", t.name, waitFailed(ctx, t, err))}
	}
	defer release()
	return s.run(ctx, t, code, params)
}

// prepareForCall has t prepared, ahead of the tools nobody waits for
// (Prepare), and its code compiled, telling the trace ctx carries how
// far along that is (WithPreparationTrace). Until a tool that was not
// prepared yet is, and compiled, the background starts nothing
// (callWaits); compiling again the code of a prepared tool that was
// unloaded is not preparing, and holds nothing up.
func (t *Tool) prepareForCall(ctx context.Context) (wazero.CompiledModule, error) {
	if !t.isReady() {
		defer t.sb.callWaits()()
	}
	tr := newTracer(ctx, t)
	if err := t.await(ctx, tr); err != nil {
		return nil, err
	}
	if t.loadedCode() == nil {
		tr.report(StageCompiling)
	}
	code, err := t.compiled(ctx, callLane)
	if errors.Is(err, errCompileWait) {
		err = fmt.Errorf("%w: %w: %w", ctxEnded(ctx), context.Cause(ctx), err)
	}
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", t.name, err)
	}
	tr.done()
	return code, nil
}

// run runs one call of t's code in a fresh instance, params on stdin.
func (s *Sandbox) run(ctx context.Context, t *Tool, code wazero.CompiledModule, params []byte) Result {
	snap := t.snapshot()
	var from fakeTime
	if snap != nil {
		from = snap.time
	}
	ex := s.execute(ctx, t, bytes.NewReader(params), from, func(ctx context.Context, cfg wazero.ModuleConfig, mem *callMemory) error {
		return s.runInstance(ctx, t, code, cfg, mem, snap)
	})
	res := Result{Usage: ex.usage}
	if ex.err != nil {
		res.Err = fmt.Errorf("tool %q: %w", t.name, ex.err)
	} else {
		res.Stdout = ex.stdout.buf.Bytes()
	}
	return res
}

// execution is one run of a tool's code, a call or its initialization:
// what it wrote, what it used, why it failed (nil if it did not), and
// where its reproducible clocks stood at its end.
type execution struct {
	stdout *cappedBuffer
	usage  Usage
	err    error
	time   fakeTime
}

// execute runs t's code once: steps instantiates and runs it, with the
// module config and memory execute prepares. The run reads stdin, and its
// output is capped; it sees t's granted files and environment and
// nothing else, under t's memory limit and fuel budget, with the real
// clocks or, in a reproducible sandbox, fake ones carrying on from from.
// Its failure says why, as a call's does: the tail of stderr, the limit
// it hit, the escape it tried.
func (s *Sandbox) execute(ctx context.Context, t *Tool, stdin io.Reader, from fakeTime, steps func(context.Context, wazero.ModuleConfig, *callMemory) error) execution {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stdout := &cappedBuffer{max: t.limits.StdoutBytes}
	stderr := &cappedBuffer{max: t.limits.StderrBytes}
	stdout.onOverflow = func() { cancel(fmt.Errorf("%w: stdout exceeded %d bytes", ErrOutputTooBig, t.limits.StdoutBytes)) }
	stderr.onOverflow = func() { cancel(fmt.Errorf("%w: stderr exceeded %d bytes", ErrOutputTooBig, t.limits.StderrBytes)) }
	ex := execution{stdout: stdout, time: from}

	denied := &denials{}
	fsc, closeFS, err := mountFS(t.mounts, denied, &s.links)
	if err != nil {
		ex.err = err
		return ex
	}
	defer closeFS()
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs(t.name).
		WithStdin(stdin).
		WithStdout(stdout).
		WithStderr(stderr).
		WithFSConfig(fsc)
	if s.cfg.reproducible {
		cfg = withFakeTime(cfg, &ex.time)
	} else {
		cfg = withRealTime(ctx, cfg)
	}
	for _, k := range t.EnvKeys() {
		cfg = cfg.WithEnv(k, t.env[k])
	}

	mem := &callMemory{limit: uint64(t.limits.MemoryPages) * pageSize}
	fuel := meter.NewMeter(t.limits.Fuel, meter.WithSliceSize(sliceSize()))
	runCtx := meter.WithMeter(withDenials(withCallMemory(ctx, mem), denied), fuel)
	start := time.Now()
	err = steps(runCtx, cfg, mem)
	// wazero frees an instance's memory when it closes the instance, but
	// not that of one whose instantiation failed after making it (a start
	// section that trapped, a data segment out of bounds): nothing runs
	// the memory once steps returns, and a second Free does nothing.
	mem.Free()
	ex.usage = Usage{Wall: time.Since(start), Fuel: fuel.Consumed(), StdoutBytes: int64(stdout.buf.Len()), MemoryPages: mem.peakPages()}
	reason := s.classify(ctx, t, err, stderr, ex.usage.Fuel)
	if reason != nil && mem.refused {
		reason = fmt.Errorf("%w (%d pages): %w", ErrMemory, t.limits.MemoryPages, reason)
	}
	// Whatever the tool made of a refused escape, the call tried to leave
	// its dirs: that is what the operator needs to read first.
	if derr := denied.err(); derr != nil && reason != nil {
		reason = fmt.Errorf("%w (then: %w)", derr, reason)
	} else if derr != nil {
		reason = derr
	}
	ex.err = reason
	return ex
}

// withRealTime gives a call the host's clocks and cryptographic
// randomness. Sleeps end early when the call's context does, so that a
// tool asleep past its deadline is stopped at its next safepoint.
func withRealTime(ctx context.Context, cfg wazero.ModuleConfig) wazero.ModuleConfig {
	return cfg.
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(func(ns int64) {
			t := time.NewTimer(time.Duration(ns))
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}).
		WithRandSource(rand.Reader)
}

// classify says why a call failed, from what wazero returned; nil if it
// did not. fuel is what the call consumed. A call that returned after its
// context ended failed too: a sleep it asked for was cut short.
func (s *Sandbox) classify(ctx context.Context, t *Tool, err error, stderr *cappedBuffer, fuel uint64) error {
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, ErrOutputTooBig) {
		return cause
	}
	var exit *sys.ExitError
	switch {
	case errors.Is(err, meter.ErrOutOfFuel):
		return fmt.Errorf("%w after %d units (budget %d)", ErrOutOfFuel, fuel, t.limits.Fuel)
	case errors.Is(err, meter.ErrCallDepth):
		return fmt.Errorf("%w: more than %d nested calls", ErrCallDepth, meter.DefaultMaxCallDepth)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w after %s", ErrTimeout, deadlineOf(ctx))
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %w", ErrCanceled, context.Cause(ctx))
	case errors.As(err, &exit):
		return fmt.Errorf("%w %d%s", ErrExit, exit.ExitCode(), stderrSuffix(stderr))
	}
	return fmt.Errorf("%w: %s%s", ErrTrap, trapMessage(err), stderrSuffix(stderr))
}

type deadlineKey struct{}

// withDeadlineOf notes which deadline will end the call: the tool's
// timeout, or the caller's, if that comes first. A timeout then says
// which it was.
func withDeadlineOf(ctx context.Context, timeout time.Duration) context.Context {
	what := timeout.String()
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		what = time.Until(d).Round(time.Millisecond).String() + " (the caller's deadline)"
	}
	return context.WithValue(ctx, deadlineKey{}, what)
}

func deadlineOf(ctx context.Context) string {
	what, _ := ctx.Value(deadlineKey{}).(string)
	return what
}

// waitFailed says why a call that never started ended: its deadline or its
// caller, while it waited for admission.
func waitFailed(ctx context.Context, t *Tool, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w after %s: %w", ErrTimeout, deadlineOf(ctx), err)
	}
	return fmt.Errorf("%w: %w: %w", ErrCanceled, context.Cause(ctx), err)
}

func stderrSuffix(stderr *cappedBuffer) string {
	tail := strings.TrimSpace(stderr.tail(stderrTail))
	if tail == "" {
		return ""
	}
	return ": " + tail
}

// trapMessage keeps what a trap error says, without the module and
// function wazero prefixes or the stack trace it appends.
func trapMessage(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if _, rest, ok := strings.Cut(s, "] failed: "); ok {
		s = rest
	}
	return s
}
