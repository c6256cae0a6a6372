package tasks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/eventlog"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/plan"
	"github.com/google/uuid"
)

// FrontDoor is the one way in for tasks: every surface (the HTTP API,
// tool deploys, UFO's dispatch, constellation clients, the MCP gateway)
// runs a command, starts a plan or a fleet, and checks an order through
// it, so that nothing reaches a device unchecked or unadmitted, and a
// task's run is built in one place. It knows nothing of HTTP, MCP or
// WebSocket: each surface maps its answers and errors to its own wire.
type FrontDoor struct {
	admission *Admission
	sessions  *SessionManager
	// matching are the enrolled devices a selector picks (the store's
	// DeviceReads.Matching): the devices a fleet runs on.
	matching func(context.Context, access.Selector) ([]string, error)

	// CancelElsewhere, set on a node of a cluster before it serves, asks
	// the other nodes to cancel task id, if one runs it, saying why; nil
	// on a single node.
	CancelElsewhere func(id, why string) error
	// cancelWait is cancelElsewhereWait, but for tests.
	cancelWait time.Duration
}

// NewFrontDoor is the front door over admission a and the session
// manager m; matching gives the enrolled devices a selector picks.
func NewFrontDoor(a *Admission, m *SessionManager, matching func(context.Context, access.Selector) ([]string, error)) *FrontDoor {
	return &FrontDoor{admission: a, sessions: m, matching: matching}
}

// Asker is who asks for a task, and through what: its identity, whose
// role and scope hold the task, and the requester the task is recorded
// under (its kind, and a constellation's client id).
type Asker struct {
	Who *identity.Caller
	// Kind is the requester's Kind: api.RequesterOperator,
	// api.RequesterMCP or api.RequesterConstellation.
	Kind string
	// Client is a constellation's Client id; empty for the others.
	Client string
}

// requester is the requester a's tasks are recorded under.
func (a Asker) requester() api.Requester { return a.Who.Requester(a.Kind, a.Client) }

// RunError is why a task that was admitted did not start or did not run
// to its end: the session limit, a session id taken, storage, a node
// that drains or hands off. Surfaces answer it otherwise than a refused
// order (HTTP: 409 or 503 rather than 400 or 403).
type RunError struct{ Err error }

func (e *RunError) Error() string { return e.Err.Error() }
func (e *RunError) Unwrap() error { return e.Err }

// InvalidActions is a command whose actions break the wire's rules; the
// MCP gateway names them as its argument.
type InvalidActions struct{ Err error }

func (e *InvalidActions) Error() string { return e.Err.Error() }
func (e *InvalidActions) Unwrap() error { return e.Err }

// CommandTask is a single command, as a surface asks for it.
type CommandTask struct {
	Asker
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

// AdmittedCommand is a command the front door checked and admitted,
// ready to run.
type AdmittedCommand struct {
	door    *FrontDoor
	spec    SessionSpec
	actions []protocol.Command
	timeout time.Duration
}

// AdmitCommand checks c, in this order: its timeout, its actions
// against the wire's rules, then admission. Nothing is recorded or sent.
func (d *FrontDoor) AdmitCommand(c CommandTask) (AdmittedCommand, error) {
	timeout, err := CommandTimeout(c.TimeoutArg, c.Timeout)
	if err != nil {
		return AdmittedCommand{}, err
	}
	if err := ValidateActions(c.Actions); err != nil {
		return AdmittedCommand{}, &InvalidActions{err}
	}
	if err := d.admission.admit(CommandOrder(c.Who, c.Device, c.Actions)); err != nil {
		return AdmittedCommand{}, err
	}
	// The id is chosen now, so that a cancellation that comes before the
	// command has started knows what to cancel.
	spec := SessionSpec{ID: store.NewRowID(), DeviceID: c.Device, Requester: c.requester(), Scope: c.Who.Scope, Key: c.Key,
		WaitForDevice: c.WaitForDevice, Tee: c.Tee}
	return AdmittedCommand{door: d, spec: spec, actions: c.Actions, timeout: timeout}, nil
}

// SessionID is the id of the session the command runs as.
func (a AdmittedCommand) SessionID() string { return a.spec.ID }

// Run runs the command as a session of its own and waits for it to end.
// The session runs on a context of its own: ctx bounds creating it
// alone. An error is a *RunError.
func (a AdmittedCommand) Run(ctx context.Context) (api.CommandResponse, error) {
	resp, err := a.door.sessions.RunUnadmitted(ctx, a.spec, a.actions, a.timeout)
	if err != nil {
		return resp, &RunError{err}
	}
	return resp, nil
}

// RunCommand admits c and runs it (AdmitCommand, then Run).
func (d *FrontDoor) RunCommand(ctx context.Context, c CommandTask) (api.CommandResponse, error) {
	a, err := d.AdmitCommand(c)
	if err != nil {
		return api.CommandResponse{}, err
	}
	return a.Run(ctx)
}

// CommandTimeout reads a command's timeout, named what in errors: a
// positive duration, at most a plan step's plan.MaxTimeout; empty gives
// api.DefaultCommandTimeout. The server sends a pending command again
// until its timeout, and agents remember the commands they ran (outbox
// tombstones) on the promise that none comes again later than that.
func CommandTimeout(what, s string) (time.Duration, error) {
	d, err := api.ParseTimeout(s)
	switch {
	case err != nil || d <= 0:
		return 0, fmt.Errorf("%s: %q is not a positive duration", what, s)
	case d > plan.MaxTimeout:
		return 0, fmt.Errorf("%s: %q is more than %s, the longest a command may take", what, s, plan.MaxTimeout)
	}
	return d, nil
}

// ValidateActions applies the wire's own rules, so the operator hears of a
// bad action now rather than as a rejected frame.
func ValidateActions(actions []protocol.Command) error {
	if len(actions) == 0 {
		return errors.New("field \"actions\": at least one action is required")
	}
	m := protocol.ServerMessage{Type: protocol.ServerCommand, Status: protocol.StatusContinue, Actions: actions}
	return m.Validate()
}

// PlanTask is a plan for one device, as a surface asks for it.
type PlanTask struct {
	Asker
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
	TaskEnd TaskEndFunc
	// Announce, if not nil, is told of the session once it exists and
	// before it runs: a constellation's acknowledgement must reach it
	// before the TASK_END can.
	Announce func(*Session)
}

// StartPlan admits p on its device, creates its session and starts it,
// in the background. A session id its requester already runs is refused
// (*SessionRunningError); admission's refusals come as they are, and
// failures to start as a *RunError.
func (d *FrontDoor) StartPlan(ctx context.Context, p PlanTask) (*Session, error) {
	o := PlanOrder(p.Who, p.Plan, p.Device)
	if err := d.admission.admit(o); err != nil {
		return nil, err
	}
	spec := SessionSpec{
		ID: p.ID, TaskName: TaskNameOf(p.TaskName, p.Plan), DeviceID: p.Device, Requester: p.requester(),
		Scope: p.Who.Scope, Plan: p.Plan, PlanJSON: o.planJSON, OriginalTaskName: p.OriginalTaskName, Key: p.Key, Tee: p.Tee,
	}
	return d.start(ctx, spec, p.TaskEnd, p.Announce)
}

// TaskNameOf is the task's name: the one asked for, else the plan's, else
// a fresh one.
func TaskNameOf(asked string, p *plan.Plan) string {
	switch {
	case asked != "":
		return asked
	case p.TaskName != "":
		return p.TaskName
	}
	return uuid.NewString()
}

// FleetTask is a plan for every device of a fleet, as a surface asks for
// it.
type FleetTask struct {
	Asker
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
// matches; a *NoDevicesError if none.
func (d *FrontDoor) FleetTargets(ctx context.Context, who *identity.Caller, labels map[string]string) (access.Selector, []string, error) {
	selector := access.LabelSelector(labels).And(who.Scope.Devices)
	devices, err := d.matching(ctx, selector)
	switch {
	case err != nil:
		return nil, nil, err
	case len(devices) == 0:
		return nil, nil, &NoDevicesError{labels}
	}
	return selector, devices, nil
}

// NoDevicesError: labels that match no enrolled device in the asker's
// scope.
type NoDevicesError struct{ labels map[string]string }

func (e *NoDevicesError) Error() string {
	return fmt.Sprintf("no enrolled device has the labels %s", LabelText(e.labels))
}

// StartFleet admits f's plan on each of its devices, creates the fleet's
// session and starts it, in the background. Errors as StartPlan's.
func (d *FrontDoor) StartFleet(ctx context.Context, f FleetTask) (*Session, error) {
	o := PlanOrder(f.Who, f.Plan, f.Devices...)
	if err := d.admission.admit(o); err != nil {
		return nil, err
	}
	spec := SessionSpec{
		ID: f.ID, TaskName: TaskNameOf(f.TaskName, f.Plan), Requester: f.requester(), Scope: f.Who.Scope,
		Plan: f.Plan, PlanJSON: o.planJSON,
		Fleet: &fleetSpec{labels: f.Labels, selector: f.Selector, devices: f.Devices, concurrency: f.Concurrency,
			abortPercent: f.AbortPercent},
		Key: f.Key, Tee: f.Tee,
	}
	return d.start(ctx, spec, nil, nil)
}

// start creates the session spec, tells announce of it, and runs it in
// the background.
func (d *FrontDoor) start(ctx context.Context, spec SessionSpec, taskEnd TaskEndFunc, announce func(*Session)) (*Session, error) {
	if spec.ID == "" {
		spec.ID = store.NewRowID()
	}
	sess, created, err := d.sessions.getOrCreateSession(ctx, spec)
	if err != nil {
		return nil, &RunError{err}
	}
	if !created {
		return nil, &SessionRunningError{spec.ID}
	}
	if announce != nil {
		announce(sess)
	}
	d.sessions.executeTaskAsync(sess, taskEnd)
	return sess, nil
}

// SessionRunningError refuses a plan whose session id names a session its
// requester already runs (a constellation's TASK sent again): that
// session's own TASK_END is still to come.
type SessionRunningError struct{ id string }

func (e *SessionRunningError) Error() string {
	return fmt.Sprintf("session_id %q is already running", e.id)
}

// DryRun is admission's verdict on o, which runs nothing and records
// nothing: nil, or why o may not go ahead (as admission.admit says).
func (d *FrontDoor) DryRun(o Order) error { return d.admission.admit(o) }

// MaxSessions is how many tasks may run at once.
func (d *FrontDoor) MaxSessions() int { return d.sessions.cfg.MaxSessions }

// Cancel cancels running task id, why being the cause its device
// records, and waits for it to end; ErrNotRunning if it is not running.
func (d *FrontDoor) Cancel(id, why string) error { return d.sessions.cancelTask(id, why) }

// cancelElsewhereWait bounds the wait for a task cancelled on another
// node to end: its step's grace, and the time to hear of its end. A
// cancel that reached no node (the task between nodes, a message lost)
// is answered as such, rather than waited on for the task's whole ttl.
const cancelElsewhereWait = CancelGrace + 8*time.Second

// CancelAnywhere cancels running task id wherever it runs: here, as
// Cancel does, or on the node of the cluster that runs it, which is told
// to (CancelElsewhere); it waits until the task has ended, within
// cancelElsewhereWait, or until ctx ends. ErrNotRunning if it is not
// running (it ended, or, on a single node, runs nowhere); store.ErrNotFound
// if there is no such task.
func (d *FrontDoor) CancelAnywhere(ctx context.Context, id, why string) error {
	err := d.Cancel(id, why)
	if !errors.Is(err, ErrNotRunning) || d.CancelElsewhere == nil {
		return err
	}
	row, err := d.Task(ctx, id)
	switch {
	case err != nil:
		return fmt.Errorf("task %q: %w", id, err)
	case row.State != string(api.StateCreated) && row.State != string(api.StateRunning):
		return ErrNotRunning
	}
	if err := d.CancelElsewhere(id, why); err != nil {
		return fmt.Errorf("task %q runs on another node, which could not be told to cancel it: %w", id, err)
	}
	bound := cmp.Or(d.cancelWait, cancelElsewhereWait)
	wait, stop := context.WithTimeout(ctx, bound)
	defer stop()
	if _, err := d.sessions.ended(wait, id, nil); err != nil {
		return fmt.Errorf("task %q was to be cancelled on the node that runs it, and has not ended within %s (it may be between nodes): try again: %w",
			id, bound, err)
	}
	return nil
}

// Running reports whether task id is running here.
func (d *FrontDoor) Running(id string) bool { return d.sessions.running(id) }

// Live is task id if it is running here, or nil.
func (d *FrontDoor) Live(id string) *Session { return d.sessions.liveSession(id) }

// Progress is what running plan or fleet id has done so far (see
// SessionManager.progressOf).
func (d *FrontDoor) Progress(id string) (any, bool) { return d.sessions.progressOf(id) }

// Events is the event log of task id, running or ended lately, or nil.
func (d *FrontDoor) Events(id string) *eventlog.Log { return d.sessions.eventsOf(id) }

// Task is task id as the store has it, wherever it runs or ran:
// store.ErrNotFound if there is none. A caller holds the reader to its
// scope (inscope.Checker.Row).
func (d *FrontDoor) Task(ctx context.Context, id string) (store.Session, error) {
	return d.sessions.store.Sessions().Get(ctx, id)
}

// TaskNamed is the newest task named name (UFO's task_result).
func (d *FrontDoor) TaskNamed(ctx context.Context, name string) (store.Session, error) {
	return d.sessions.store.Sessions().ByTask(ctx, name)
}

// Tasks lists the summaries of the tasks f picks, newest first.
func (d *FrontDoor) Tasks(ctx context.Context, f store.SessionFilter) ([]store.Session, error) {
	return d.sessions.store.Sessions().Summaries(ctx, f)
}

// Commands are the commands task id sent, with their outcomes, in order.
func (d *FrontDoor) Commands(ctx context.Context, id string) ([]store.Command, error) {
	return d.sessions.store.Commands().OfSession(ctx, id)
}

// StoredEvents reads task id's events from the store, for a task that
// does not run here (on another node, or ended): see storedEvents.
func (d *FrontDoor) StoredEvents(ctx context.Context, id string) ([]api.TaskEvent, bool, error) {
	return d.sessions.StoredEvents(ctx, id)
}

// Remove deletes task id, which has ended, from the store, with what is
// kept of it in memory; its audit entries stay. store.ErrNotFound if
// there is no such task. A running task is the caller's to refuse first.
func (d *FrontDoor) Remove(ctx context.Context, id string) error {
	err := d.sessions.store.Write(ctx, func(tx *store.Tx) error { return tx.Sessions().Delete(id) })
	if err == nil {
		d.sessions.forgetEvents(id)
	}
	return err
}

// Ended waits until task id has ended, wherever it runs, and returns its
// row (see SessionManager.ended).
func (d *FrontDoor) Ended(ctx context.Context, id string, waiting func(store.Session)) (store.Session, error) {
	return d.sessions.ended(ctx, id, waiting)
}
