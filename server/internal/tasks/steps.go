package tasks

import (
	"context"
	"errors"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks/internal/inventory"
)

// CancelGrace is how long a cancelled session's running step may still
// finish, as UFO's cancel_task waits.
const CancelGrace = 2 * time.Second

// sessionStepper makes a session's attempts through the dispatcher.
type sessionStepper struct {
	m *SessionManager
	s *Session
}

// attempt resolves st's calls against the device's inventory as it is now
// (a retry sees a tool the device has registered since), records and
// sends one command, and waits for its end; the events tell each. A
// cancelled session gives it cancelGrace more to finish. A single
// command's session is recorded, and ended, with its command.
func (st sessionStepper) attempt(ctx context.Context, step step, n int) dispatch.Result {
	s := st.s
	if rec, ok := s.history[stepAttempt{step.index, n}]; ok {
		return st.again(ctx, step, n, rec)
	}
	inv := inventory.Of(st.m.disp, s.DeviceID)
	actions, tools, err := inv.Resolve(step.calls, s.scope)
	if err != nil {
		r := dispatch.Result{Err: err}
		s.events.Add(st.stepEvent(api.EventStepEnd, step, n, r))
		return r
	}
	spec := dispatch.CommandSpec{
		DeviceID: s.DeviceID, SessionID: s.ID, Actor: s.Requester.String(), By: requesterBy(s.Requester),
		Step: step.index, Attempt: n, Actions: actions, Tools: tools, Timeout: step.timeout, WaitForDevice: step.waitForDevice,
	}
	if s.Kind == api.KindCommand {
		row := s.row(api.StateRunning)
		spec.Session = &row
	}
	if s.owner.Node != "" {
		// Another node may adopt the session while this one runs it.
		spec.Fence = &s.owner
	}
	var cmd *dispatch.Command
	spec.Preparing = func(p protocol.Preparing) { st.preparing(step, n, cmd.ResponseID())(p) }
	cmd = st.m.disp.NewCommand(spec)
	s.events.Add(st.stepEvent(api.EventStepStart, step, n, dispatch.Result{ResponseID: cmd.ResponseID()}))
	gctx, cancel := withGrace(ctx, CancelGrace)
	r := st.m.disp.Run(gctx, cmd)
	cancel()
	var notRecorded *dispatch.NotRecorded
	switch {
	case errors.Is(r.Err, store.ErrAdopted):
		// Its end is the adopter's to tell, in its events too.
		st.m.cancelSession(s, reasonAdoptedElsewhere)
		s.events.Leave()
		return r
	case errors.Is(r.Err, store.ErrKeyTaken):
		st.m.cancelSession(s, reasonKeyTaken)
		s.events.Leave()
		return r
	case errors.As(r.Err, &notRecorded):
		s.setReason(reasonNotRecorded)
		s.cancel(InDoubt(notRecorded.Why))
		s.events.Leave()
		return r
	}
	s.events.Add(st.stepEvent(api.EventStepEnd, step, n, r))
	return r
}

// stepAttempt names a command of a session: its step, from 0, and its
// attempt at it, from 1.
type stepAttempt struct{ step, attempt int }

// replayed reports whether attempt n at step is one of the commands
// recorded before the session was adopted: its outcome, or the wait for
// it, is not delayed again by a retry's wait.
func (st sessionStepper) replayed(step, n int) bool {
	_, ok := st.s.history[stepAttempt{step, n}]
	return ok
}

// again is attempt n at step of a session adopted from another node, which
// had recorded it as rec: the command is not made again. One that has
// ended ends the attempt as it did; one still pending, which may have
// been sent, is sent again with the same response_id and call_ids. Its
// events are those the first node emitted, so that an event stream
// numbers them alike.
func (st sessionStepper) again(ctx context.Context, step step, n int, rec store.Command) dispatch.Result {
	s := st.s
	s.events.Add(st.stepEvent(api.EventStepStart, step, n, dispatch.Result{ResponseID: rec.ResponseID}))
	// A single command whose outcome the store holds, but not its
	// session's end, has it recorded by the session manager.
	r := dispatch.Result{ResponseID: rec.ResponseID, Results: rec.Results}
	if rec.Status == store.CommandPending {
		var row *store.Session
		if s.Kind == api.KindCommand {
			ses := s.row(api.StateRunning)
			row = &ses
		}
		gctx, cancel := withGrace(ctx, CancelGrace)
		r = st.m.disp.Resume(gctx, rec, row, &s.owner, st.preparing(step, n, rec.ResponseID))
		cancel()
	}
	s.events.Add(st.stepEvent(api.EventStepEnd, step, n, r))
	return r
}

// stepEvent is the event of attempt n at step: its start, which names
// the command, or its end with r.
func (st sessionStepper) stepEvent(typ string, step step, n int, r dispatch.Result) api.TaskEvent {
	e := api.TaskEvent{Type: typ, SessionID: st.s.ID, Steps: st.s.steps, Step: &step.index, Attempt: n, Tool: step.label(),
		ResponseID: r.ResponseID}
	if typ == api.EventStepEnd {
		e.Status, e.Results, e.Error = r.Status(), r.Results, r.Failure()
	}
	return e
}

// preparing tells the session's events how far the device has come
// preparing the tool of attempt n at step, command responseID.
func (st sessionStepper) preparing(step step, n int, responseID string) func(protocol.Preparing) {
	return func(p protocol.Preparing) {
		e := st.stepEvent(api.EventPreparing, step, n, dispatch.Result{ResponseID: responseID})
		e.Preparing = &p
		st.s.events.Add(e)
	}
}

// withGrace returns a context that ends grace after ctx ends, with ctx's
// cause.
func withGrace(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		time.AfterFunc(grace, func() { cancel(context.Cause(ctx)) })
	})
	return gctx, func() { stop(); cancel(context.Canceled) }
}
