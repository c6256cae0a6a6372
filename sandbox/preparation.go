package sandbox

import "context"

// Stage is how far a tool's preparation has come: what a call that waits
// for it waits for.
type Stage string

// The stages of a tool's preparation, in order. A tool in the command or
// plain form has two steps, instrumenting and compiling; one that starts
// from a snapshot three: instrumenting, initializing (which compiles it)
// and compiling for the call, which takes no time when initializing left
// the code loaded for it.
const (
	// StageQueued: the tool waits its turn for the step that comes next.
	StageQueued Stage = "queued"
	// StageInstrumenting: its module is being instrumented for fuel.
	StageInstrumenting Stage = "instrumenting"
	// StageInitializing: it is being compiled and initialized, and its
	// snapshot taken.
	StageInitializing Stage = "initializing"
	// StageCompiling: its code is being compiled for the call.
	StageCompiling Stage = "compiling"
	// StageReady: it is prepared; the call's own timeout starts now.
	StageReady Stage = "ready"
)

// Preparation says how far the preparation of the tool a call waits for
// has come: step Step of Steps, at Stage. Step is 0 while it is queued,
// and Steps once it is ready.
type Preparation struct {
	Tool  string
	Stage Stage
	Step  int
	Steps int
}

type preparationTraceKey struct{}

// WithPreparationTrace returns ctx carrying fn, which Call and Prepare
// call, in their own goroutine, each time the preparation of the tool
// they wait for comes to a new stage, and once more, with StageReady,
// when it is done: it says why a call has not started yet. Nothing is
// traced for a call whose tool was prepared and its code loaded. fn must
// not block for long: the call waits for it.
func WithPreparationTrace(ctx context.Context, fn func(Preparation)) context.Context {
	return context.WithValue(ctx, preparationTraceKey{}, fn)
}

// tracer reports the stages of t's preparation to the function ctx
// carries, once each.
type tracer struct {
	fn   func(Preparation)
	t    *Tool
	last Stage
}

func newTracer(ctx context.Context, t *Tool) *tracer {
	fn, _ := ctx.Value(preparationTraceKey{}).(func(Preparation))
	return &tracer{fn: fn, t: t}
}

// report says that t's preparation is at stage st, unless it said so
// last.
func (tr *tracer) report(st Stage) {
	if tr.fn == nil || st == tr.last {
		return
	}
	tr.last = st
	tr.fn(Preparation{Tool: tr.t.name, Stage: st, Step: tr.t.stepOf(st), Steps: tr.t.steps})
}

// done says that t is prepared, if anything was said before.
func (tr *tracer) done() {
	if tr.last != "" {
		tr.report(StageReady)
	}
}

// stepOf is the step of t's preparation that st is.
func (t *Tool) stepOf(st Stage) int {
	switch st {
	case StageQueued:
		return 0
	case StageInstrumenting:
		return 1
	case StageInitializing:
		return 2
	}
	return t.steps
}

// setStage records that t's preparation is at st, and wakes whoever
// watches it.
func (t *Tool) setStage(st Stage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stage = st
	close(t.staged)
	t.staged = make(chan struct{})
}

// progress is the stage t's preparation is at, and a channel closed at
// the next.
func (t *Tool) progress() (Stage, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stage, t.staged
}

// Prepare is Ready for a caller that needs t now, as a call does: if t
// still waits its turn to be instrumented or initialized, it is prepared
// at once, ahead of the tools loaded before it and beside the one being
// prepared in the background (when both modules are small, their
// instrumenting and compiling take turns: compiling.prepareWork), and
// Prepare waits for that. Its stages go to the function
// WithPreparationTrace put in ctx.
func (t *Tool) Prepare(ctx context.Context) error {
	if !t.isReady() {
		defer t.sb.callWaits()()
	}
	tr := newTracer(ctx, t)
	if err := t.await(ctx, tr); err != nil {
		return err
	}
	tr.done()
	return nil
}

// await waits for t to be ready, claiming it from the background's line
// whenever it joins it, and tells tr of each stage it comes to. The
// stage is read before the claim: a tool that joins the line after it
// has changed its stage since, and is claimed on the next turn.
func (t *Tool) await(ctx context.Context, tr *tracer) error {
	for {
		if t.isReady() {
			return t.readyErr
		}
		stage, next := t.progress()
		t.sb.claim(t)
		tr.report(stage)
		select {
		case <-t.ready:
			return t.readyErr
		case <-next:
		case <-ctx.Done():
			return t.Ready(ctx)
		}
	}
}

func (t *Tool) isReady() bool {
	select {
	case <-t.ready:
		return true
	default:
		return false
	}
}
