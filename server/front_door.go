package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/plan"
	"github.com/google/uuid"
)

// frontDoor is the one way in for tasks: every surface (the HTTP API,
// tool deploys, UFO's dispatch, constellation clients, the MCP gateway)
// runs a command, starts a plan or a fleet, and checks an order through
// it, so that nothing reaches a device unchecked or unadmitted, and a
// task's run is built in one place. It knows nothing of HTTP, MCP or
// WebSocket: each surface maps its answers and errors to its own wire.
type frontDoor struct {
	admission *admission
	sessions  *sessionManager
	// matching are the enrolled devices a selector picks (the store's
	// DevicesMatching): the devices a fleet runs on.
	matching func(context.Context, access.Selector) ([]string, error)
}

// asker is who asks for a task, and through what: its identity, whose
// role and scope hold the task, and the requester the task is recorded
// under (its kind, and a constellation's client id).
type asker struct {
	who *identity.Caller
	// kind is the requester's kind: api.RequesterOperator,
	// api.RequesterMCP or api.RequesterConstellation.
	kind string
	// client is a constellation's client id; empty for the others.
	client string
}

// requester is the requester a's tasks are recorded under.
func (a asker) requester() api.Requester { return a.who.Requester(a.kind, a.client) }

// runError is why a task that was admitted did not start or did not run
// to its end: the session limit, a session id taken, storage, a node
// that drains or hands off. Surfaces answer it otherwise than a refused
// order (HTTP: 409 or 503 rather than 400 or 403).
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// invalidActions is a command whose actions break the wire's rules; the
// MCP gateway names them as its argument.
type invalidActions struct{ err error }

func (e *invalidActions) Error() string { return e.err.Error() }
func (e *invalidActions) Unwrap() error { return e.err }

// commandTask is a single command, as a surface asks for it.
type commandTask struct {
	asker
	Device  string
	Actions []protocol.Command
	// Timeout is the command's timeout as the request gave it; empty
	// gives the default, api.DefaultCommandTimeout. TimeoutArg names it
	// in errors: `field "timeout"`, `query "timeout"`.
	Timeout, TimeoutArg string
	// Key, if not nil, is the request's idempotency key, recorded with
	// the command.
	Key *store.IdempotencyKey
	// WaitForDevice: api.CommandRequest.WaitForDevice.
	WaitForDevice bool
	// Tee, if not nil, is also given each of the task's events.
	Tee func(api.TaskEvent)
}

// admittedCommand is a command the front door checked and admitted,
// ready to run.
type admittedCommand struct {
	door    *frontDoor
	spec    sessionSpec
	actions []protocol.Command
	timeout time.Duration
}

// AdmitCommand checks c, in this order: its timeout, its actions
// against the wire's rules, then admission. Nothing is recorded or sent.
func (d *frontDoor) AdmitCommand(c commandTask) (admittedCommand, error) {
	timeout, err := commandTimeout(c.TimeoutArg, c.Timeout)
	if err != nil {
		return admittedCommand{}, err
	}
	if err := validateActions(c.Actions); err != nil {
		return admittedCommand{}, &invalidActions{err}
	}
	if err := d.admission.admit(commandOrder(c.who, c.Device, c.Actions)); err != nil {
		return admittedCommand{}, err
	}
	// The id is chosen now, so that a cancellation that comes before the
	// command has started knows what to cancel.
	spec := sessionSpec{ID: store.NewRowID(), DeviceID: c.Device, Requester: c.requester(), Scope: c.who.Scope, Key: c.Key,
		WaitForDevice: c.WaitForDevice, Tee: c.Tee}
	return admittedCommand{door: d, spec: spec, actions: c.Actions, timeout: timeout}, nil
}

// SessionID is the id of the session the command runs as.
func (a admittedCommand) SessionID() string { return a.spec.ID }

// Run runs the command as a session of its own and waits for it to end.
// The session runs on a context of its own: ctx bounds creating it
// alone. An error is a *runError.
func (a admittedCommand) Run(ctx context.Context) (api.CommandResponse, error) {
	resp, err := a.door.sessions.runCommand(ctx, a.spec, a.actions, a.timeout)
	if err != nil {
		return resp, &runError{err}
	}
	return resp, nil
}

// RunCommand admits c and runs it (AdmitCommand, then Run).
func (d *frontDoor) RunCommand(ctx context.Context, c commandTask) (api.CommandResponse, error) {
	a, err := d.AdmitCommand(c)
	if err != nil {
		return api.CommandResponse{}, err
	}
	return a.Run(ctx)
}

// commandTimeout reads a command's timeout, named what in errors: a
// positive duration, at most a plan step's plan.MaxTimeout; empty gives
// api.DefaultCommandTimeout. The server sends a pending command again
// until its timeout, and agents remember the commands they ran (outbox
// tombstones) on the promise that none comes again later than that.
func commandTimeout(what, s string) (time.Duration, error) {
	d, err := api.ParseTimeout(s)
	switch {
	case err != nil || d <= 0:
		return 0, fmt.Errorf("%s: %q is not a positive duration", what, s)
	case d > plan.MaxTimeout:
		return 0, fmt.Errorf("%s: %q is more than %s, the longest a command may take", what, s, plan.MaxTimeout)
	}
	return d, nil
}

// validateActions applies the wire's own rules, so the operator hears of a
// bad action now rather than as a rejected frame.
func validateActions(actions []protocol.Command) error {
	if len(actions) == 0 {
		return errors.New("field \"actions\": at least one action is required")
	}
	m := protocol.ServerMessage{Type: protocol.ServerCommand, Status: protocol.StatusContinue, Actions: actions}
	return m.Validate()
}

// planTask is a plan for one device, as a surface asks for it.
type planTask struct {
	asker
	Device string
	Plan   *plan.Plan
	// ID is the session's id: the client's, or empty for a fresh one.
	ID string
	// TaskName is the name asked for; empty: the plan's, else a fresh
	// one. OriginalTaskName is the name the client sent, when TaskName
	// is that name sanitized.
	TaskName, OriginalTaskName string
	// Key, if not nil, is the request's idempotency key, with the answer
	// a repeat gets, recorded with the task.
	Key *store.IdempotencyKey
	// Tee, if not nil, is also given each of the task's events.
	Tee func(api.TaskEvent)
	// TaskEnd, if not nil, gets the task's TASK_END.
	TaskEnd taskEndFunc
	// Announce, if not nil, is told of the session once it exists and
	// before it runs: a constellation's acknowledgement must reach it
	// before the TASK_END can.
	Announce func(*session)
}

// StartPlan admits p on its device, creates its session and starts it,
// in the background. A session id its requester already runs is refused
// (*sessionRunningError); admission's refusals come as they are, and
// failures to start as a *runError.
func (d *frontDoor) StartPlan(ctx context.Context, p planTask) (*session, error) {
	o := planOrder(p.who, p.Plan, p.Device)
	if err := d.admission.admit(o); err != nil {
		return nil, err
	}
	spec := sessionSpec{
		ID: p.ID, TaskName: taskNameOf(p.TaskName, p.Plan), DeviceID: p.Device, Requester: p.requester(),
		Scope: p.who.Scope, Plan: p.Plan, PlanJSON: o.planJSON, OriginalTaskName: p.OriginalTaskName, Key: p.Key, Tee: p.Tee,
	}
	return d.start(ctx, spec, p.TaskEnd, p.Announce)
}

// taskNameOf is the task's name: the one asked for, else the plan's, else
// a fresh one.
func taskNameOf(asked string, p *plan.Plan) string {
	switch {
	case asked != "":
		return asked
	case p.TaskName != "":
		return p.TaskName
	}
	return uuid.NewString()
}

// fleetTask is a plan for every device of a fleet, as a surface asks for
// it.
type fleetTask struct {
	asker
	Plan *plan.Plan
	// Labels pick the devices, Selector is them narrowed by the asker's
	// scope, and Devices are the devices it matched (FleetTargets).
	Labels   map[string]string
	Selector access.Selector
	Devices  []string
	// Concurrency and AbortPercent: api.FleetRequest's.
	Concurrency, AbortPercent int
	// ID and TaskName are the fleet's, chosen by the surface, which
	// answers with them; TaskName empty: the plan's, else a fresh one.
	ID, TaskName string
	// Key, if not nil, is the request's idempotency key, with the answer
	// a repeat gets, recorded with the task.
	Key *store.IdempotencyKey
	// Tee, if not nil, is also given each of the fleet's events.
	Tee func(api.TaskEvent)
}

// FleetTargets are the devices a fleet with labels runs on for who: the
// selector, labels narrowed by who's scope, and the enrolled devices it
// matches; a *noDevicesError if none.
func (d *frontDoor) FleetTargets(ctx context.Context, who *identity.Caller, labels map[string]string) (access.Selector, []string, error) {
	selector := access.LabelSelector(labels).And(who.Scope.Devices)
	devices, err := d.matching(ctx, selector)
	switch {
	case err != nil:
		return nil, nil, err
	case len(devices) == 0:
		return nil, nil, &noDevicesError{labels}
	}
	return selector, devices, nil
}

// noDevicesError: labels that match no enrolled device in the asker's
// scope.
type noDevicesError struct{ labels map[string]string }

func (e *noDevicesError) Error() string {
	return fmt.Sprintf("no enrolled device has the labels %s", labelText(e.labels))
}

// StartFleet admits f's plan on each of its devices, creates the fleet's
// session and starts it, in the background. Errors as StartPlan's.
func (d *frontDoor) StartFleet(ctx context.Context, f fleetTask) (*session, error) {
	o := planOrder(f.who, f.Plan, f.Devices...)
	if err := d.admission.admit(o); err != nil {
		return nil, err
	}
	spec := sessionSpec{
		ID: f.ID, TaskName: taskNameOf(f.TaskName, f.Plan), Requester: f.requester(), Scope: f.who.Scope,
		Plan: f.Plan, PlanJSON: o.planJSON,
		Fleet: &fleetSpec{labels: f.Labels, selector: f.Selector, devices: f.Devices, concurrency: f.Concurrency,
			abortPercent: f.AbortPercent},
		Key: f.Key, Tee: f.Tee,
	}
	return d.start(ctx, spec, nil, nil)
}

// start creates the session spec, tells announce of it, and runs it in
// the background.
func (d *frontDoor) start(ctx context.Context, spec sessionSpec, taskEnd taskEndFunc, announce func(*session)) (*session, error) {
	if spec.ID == "" {
		spec.ID = store.NewRowID()
	}
	sess, created, err := d.sessions.getOrCreateSession(ctx, spec)
	if err != nil {
		return nil, &runError{err}
	}
	if !created {
		return nil, &sessionRunningError{spec.ID}
	}
	if announce != nil {
		announce(sess)
	}
	d.sessions.executeTaskAsync(sess, taskEnd)
	return sess, nil
}

// sessionRunningError refuses a plan whose session id names a session its
// requester already runs (a constellation's TASK sent again): that
// session's own TASK_END is still to come.
type sessionRunningError struct{ id string }

func (e *sessionRunningError) Error() string {
	return fmt.Sprintf("session_id %q is already running", e.id)
}

// DryRun is admission's verdict on o, which runs nothing and records
// nothing: nil, or why o may not go ahead (as admission.admit says).
func (d *frontDoor) DryRun(o order) error { return d.admission.admit(o) }

// MaxSessions is how many tasks may run at once.
func (d *frontDoor) MaxSessions() int { return d.sessions.cfg.MaxSessions }

// Cancel cancels running task id, why being the cause its device
// records, and waits for it to end; errNotRunning if it is not running.
func (d *frontDoor) Cancel(id, why string) error { return d.sessions.cancelTask(id, why) }

// Running reports whether task id is running here.
func (d *frontDoor) Running(id string) bool { return d.sessions.running(id) }

// Live is task id if it is running here, or nil.
func (d *frontDoor) Live(id string) *session { return d.sessions.liveSession(id) }

// Progress is what running plan or fleet id has done so far (see
// sessionManager.progressOf).
func (d *frontDoor) Progress(id string) (any, bool) { return d.sessions.progressOf(id) }

// Events is the event log of task id, running or ended lately, or nil.
func (d *frontDoor) Events(id string) *eventLog { return d.sessions.eventsOf(id) }

// Forget drops what is kept in memory of task id, removed from the
// store.
func (d *frontDoor) Forget(id string) { d.sessions.forgetEvents(id) }

// Ended waits until task id has ended, wherever it runs, and returns its
// row (see sessionManager.ended).
func (d *frontDoor) Ended(ctx context.Context, id string, waiting func(store.Session)) (store.Session, error) {
	return d.sessions.ended(ctx, id, waiting)
}
