package server

import (
	"context"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
)

// cancelGrace is how long a cancelled session's running step may still
// finish, as UFO's cancel_task waits.
const cancelGrace = 2 * time.Second

// sessionStepper makes a session's attempts through the dispatcher.
type sessionStepper struct {
	m *sessionManager
	s *session
}

// attempt resolves st's calls against the device's inventory as it is now
// (a retry sees a tool the device has registered since), records and
// sends one command, and waits for its end; the events tell each. A
// cancelled session gives it cancelGrace more to finish. A single
// command's session is recorded, and ended, with its command.
func (st sessionStepper) attempt(ctx context.Context, step step, n int) commandResult {
	s := st.s
	inv := st.m.disp.inventory(s.DeviceID)
	actions, tools, err := inv.resolve(step.calls, s.scope)
	if err != nil {
		r := commandResult{err: err}
		s.events.add(st.stepEvent(api.EventStepEnd, step, n, r))
		return r
	}
	spec := commandSpec{
		deviceID: s.DeviceID, sessionID: s.ID, actor: s.Requester.String(), by: requesterBy(s.Requester),
		step: step.index, attempt: n, actions: actions, tools: tools, timeout: step.timeout, waitForDevice: step.waitForDevice,
	}
	if s.Kind == api.KindCommand {
		row := s.row(api.StateRunning)
		spec.session = &row
	}
	cmd := st.m.disp.newCommand(spec)
	s.events.add(st.stepEvent(api.EventStepStart, step, n, commandResult{responseID: cmd.rec.ResponseID}))
	gctx, cancel := withGrace(ctx, cancelGrace)
	r := st.m.disp.run(gctx, cmd)
	cancel()
	s.events.add(st.stepEvent(api.EventStepEnd, step, n, r))
	return r
}

// stepEvent is the event of attempt n at step: its start, which names
// the command, or its end with r.
func (st sessionStepper) stepEvent(typ string, step step, n int, r commandResult) api.TaskEvent {
	e := api.TaskEvent{Type: typ, SessionID: st.s.ID, Steps: st.s.steps, Step: &step.index, Attempt: n, Tool: step.label(),
		ResponseID: r.responseID}
	if typ == api.EventStepEnd {
		e.Status, e.Results, e.Error = r.status(), r.results, r.failure()
	}
	return e
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
