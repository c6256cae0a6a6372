package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/eventlog"
	"github.com/edgeaip/edgeaip/server/internal/lazylog"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/unrecorded"
	"github.com/edgeaip/edgeaip/server/metrics"
	"github.com/edgeaip/edgeaip/server/plan"
	"github.com/google/uuid"
)

// TaskEndFunc delivers a TASK_END to whoever asked for the task.
type TaskEndFunc func(*protocol.ServerMessage) error

// SessionSpec is a session to create.
type SessionSpec struct {
	ID        string // required: the caller's, or a fresh one
	TaskName  string
	DeviceID  string // empty for a fleet
	ParentID  string // the fleet a plan runs for
	Requester api.Requester
	// Scope is the requester's: each command is held to its tool
	// patterns when it is sent, as admission held the request.
	Scope access.Scope
	Plan  *plan.Plan // nil for a single command
	// PlanJSON is Plan as JSON, if the caller has it already: admission
	// encoded it, and a fleet's children share their fleet's. Nil: it is
	// encoded here.
	PlanJSON json.RawMessage
	Fleet    *fleetSpec // runs Plan on many devices
	// Tee is also given each of the session's events: a fleet follows its
	// children's. It is fixed before the session is published, so that
	// nothing reads it while it is written.
	Tee func(api.TaskEvent)
	// Key, if set, is the idempotency key of the request that asked for
	// the session, recorded with it: with its row for a plan or a fleet,
	// with its command for a single command.
	Key *store.IdempotencyKey

	// OriginalTaskName is the name the client sent, when TaskName is that
	// name sanitized.
	OriginalTaskName string
	// WaitForDevice: a single command whose caller asked it to wait for its
	// device (api.CommandRequest.WaitForDevice) rather than fail.
	WaitForDevice bool
}

// IdempotencyKeyTTL is how long an idempotency key is kept: a repeat
// after that is a new request.
const IdempotencyKeyTTL = 24 * time.Hour

// SessionConfig tunes the session manager.
type SessionConfig struct {
	// MaxSessions bounds the sessions running at once. Default 1000.
	MaxSessions int
	// ResultTTL is how long a finished session's results are kept.
	// Default 7 days.
	ResultTTL time.Duration
	// DeviceGrace is how long a device whose link dropped has to come
	// back before the sessions running on it are cancelled as
	// device_disconnected. A command in flight is then no longer sent
	// again, but still takes results the device may report within its own
	// timeout; one that starts in the grace waits for the device within
	// its timeout and what is left of the grace.
	// Default 60 s.
	DeviceGrace time.Duration
	// PreparationBound is how much longer the server waits for a command
	// whose device, having accepted it, says it is preparing its tool
	// (instrumenting, compiling, initializing it): the command's timeout
	// is held while the tool is prepared, up to this much in all
	// (RATIONALE.md, "A command's deadline"). Default 10 minutes.
	PreparationBound time.Duration
}

func (c *SessionConfig) SetDefaults() {
	if c.MaxSessions <= 0 {
		c.MaxSessions = 1000
	}
	if c.ResultTTL <= 0 {
		c.ResultTTL = 7 * 24 * time.Hour
	}
	if c.DeviceGrace <= 0 {
		c.DeviceGrace = 60 * time.Second
	}
	if c.PreparationBound <= 0 {
		c.PreparationBound = DefaultPreparationBound
	}
}

// DefaultPreparationBound is SessionConfig.PreparationBound's default.
const DefaultPreparationBound = 10 * time.Minute

// SessionManager is UFO's SessionManager: it creates sessions, runs each
// in a goroutine of its own, tracks their state, cancels them, ends each
// with a TASK_END to the requester, and keeps their results (in the
// store) for ResultTTL.
type SessionManager struct {
	cfg SessionConfig
	// owner is this node at its epoch now, which owns the sessions it
	// creates or adopts: a node that rejoins the cluster at a new epoch
	// creates its sessions under that one. The zero Owner on a single node.
	owner      func() store.Owner
	store      *store.Store
	unrecorded *unrecorded.Writes
	disp       *dispatch.Dispatcher
	metrics    *metrics.Metrics
	log        *slog.Logger

	mu     sync.Mutex
	closed bool
	// draining: the node drains; it takes no new task (ErrDraining), but
	// a fleet it runs still starts its devices' tasks.
	draining bool
	live     map[string]*Session
	recent   eventlog.Recent // event logs of sessions that ended lately
	wg       sync.WaitGroup  // one per live session
}

func NewSessionManager(cfg SessionConfig, owner func() store.Owner, st *store.Store, u *unrecorded.Writes, disp *dispatch.Dispatcher, mx *metrics.Metrics,
	log *slog.Logger) *SessionManager {
	cfg.SetDefaults()
	return &SessionManager{cfg: cfg, owner: owner, store: st, unrecorded: u, disp: disp, metrics: mx, log: log, live: map[string]*Session{}}
}

// Errors of getOrCreateSession.
type SessionOwnedError struct{ id, owner string }

func (e *SessionOwnedError) Error() string {
	return fmt.Sprintf("session_id %q is owned by %s", e.id, e.owner)
}

type CapacityError struct{ Running, Max int }

func (e *CapacityError) Error() string {
	return fmt.Sprintf("session limit reached: %d sessions running (limit %d)", e.Running, e.Max)
}

// ErrShuttingDown: no new sessions once shutdown has begun.
var ErrShuttingDown = errors.New("server is shutting down")

// ErrDraining: no new tasks on a node that drains.
var ErrDraining = errors.New("this node is draining, about to stop: send the request to another node of the cluster")

type SessionEndedError struct{ id string }

func (e *SessionEndedError) Error() string {
	return fmt.Sprintf("session_id %q has already ended: use a new session_id", e.id)
}

// getOrCreateSession returns the running session spec.ID if the same
// requester owns it (created false), or creates the session, durably for
// a plan. A session owned by someone else is refused, naming the owner.
func (m *SessionManager) getOrCreateSession(ctx context.Context, spec SessionSpec) (s *Session, created bool, err error) {
	m.mu.Lock()
	if s := m.live[spec.ID]; s != nil {
		m.mu.Unlock()
		if !sameOwner(s.Requester, spec.Requester) {
			return nil, false, &SessionOwnedError{spec.ID, s.Requester.String()}
		}
		return s, false, nil
	}
	if m.closed {
		m.mu.Unlock()
		return nil, false, ErrShuttingDown
	}
	if m.draining && spec.ParentID == "" {
		m.mu.Unlock()
		return nil, false, ErrDraining
	}
	if len(m.live) >= m.cfg.MaxSessions {
		n := len(m.live)
		m.mu.Unlock()
		return nil, false, &CapacityError{n, m.cfg.MaxSessions}
	}
	s = m.newSession(spec)
	m.live[s.ID] = s
	m.wg.Add(1)
	m.mu.Unlock()

	if s.Kind != api.KindCommand {
		err = m.store.Write(ctx, func(tx *store.Tx) error { return tx.Sessions().Insert(s.row(api.StateCreated)) })
		if err != nil {
			m.release(s)
			return nil, false, m.insertError(ctx, spec, err)
		}
		s.persisted = true
	}
	return s, true, nil
}

func (m *SessionManager) newSession(spec SessionSpec) *Session {
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &Session{
		ID: spec.ID, TaskName: spec.TaskName, DeviceID: spec.DeviceID, ParentID: spec.ParentID, Requester: spec.Requester,
		scope: spec.Scope, createdAt: time.Now(), events: eventlog.New(spec.DeviceID, spec.Tee), ctx: ctx, done: make(chan struct{}),
		cancel: cancel, key: spec.Key, originalTaskName: spec.OriginalTaskName, waitsForDevice: spec.WaitForDevice,
		owner: m.owner(),
	}
	switch {
	case spec.Fleet != nil:
		s.Kind, s.fleet, s.selector = api.KindFleet, newFleetRunner(m, s, spec.Plan, *spec.Fleet), spec.Fleet.selector
	case spec.Plan != nil:
		s.Kind = api.KindPlan
	default:
		s.Kind, s.steps = api.KindCommand, 1
	}
	if spec.Plan != nil {
		s.plan = spec.Plan
		s.planJSON = spec.PlanJSON
		if s.planJSON == nil {
			s.planJSON, _ = json.Marshal(spec.Plan)
		}
		s.steps = len(spec.Plan.Steps)
	}
	return s
}

// insertError explains a failed insert: an id that is taken belongs to
// someone else or to a session that has ended.
func (m *SessionManager) insertError(ctx context.Context, spec SessionSpec, err error) error {
	if !errors.Is(err, store.ErrExists) {
		return err
	}
	old, rerr := m.store.Sessions().Get(ctx, spec.ID)
	if rerr != nil {
		return err
	}
	if owner := (api.Requester{Kind: old.RequesterKind, ID: old.RequesterID, Identity: old.Identity}); !sameOwner(owner, spec.Requester) {
		return &SessionOwnedError{spec.ID, owner.String()}
	}
	return &SessionEndedError{spec.ID}
}

// executeTaskAsync runs s, a plan or a fleet, in a goroutine of its own;
// taskEnd, if not nil, gets a plan's TASK_END.
func (m *SessionManager) executeTaskAsync(s *Session, taskEnd TaskEndFunc) {
	if s.fleet != nil {
		go execute(m, s, s.fleet, nil)
		return
	}
	go m.runPlan(s, taskEnd)
}

// runPlan runs a plan session to its end; taskEnd, if not nil, gets its
// TASK_END.
func (m *SessionManager) runPlan(s *Session, taskEnd TaskEndFunc) outcome[api.PlanResult] {
	var tell func(outcome[api.PlanResult], *slog.Logger)
	if taskEnd != nil {
		tell = func(out outcome[api.PlanResult], log *slog.Logger) { sendTaskEnd(s, out, taskEnd, log) }
	}
	return execute(m, s, planRunner{plan: s.plan}, tell)
}

// RunUnadmitted runs a single command as a session of its own, as spec
// (its device, requester, scope, key and whether it waits for its
// device) says, and waits for it. It admits nothing: the front door calls
// it once an order passed admission, and tests of what lies below
// admission call it; no other code may (internal/importrules). The
// session's id is spec.ID, or a new one.
func (m *SessionManager) RunUnadmitted(ctx context.Context, spec SessionSpec, actions []protocol.Command, timeout time.Duration) (api.CommandResponse, error) {
	if spec.ID == "" {
		spec.ID = store.NewRowID()
	}
	s, _, err := m.getOrCreateSession(ctx, spec)
	if err != nil {
		return api.CommandResponse{}, err
	}
	out := execute(m, s, commandRunner{sessionID: s.ID, deviceID: spec.DeviceID, actions: actions, timeout: timeout,
		waitForDevice: spec.WaitForDevice}, nil)
	switch s.cancelReason() {
	case reasonHandedOff:
		return api.CommandResponse{}, fmt.Errorf("task %s: %w; repeat the request there with its Idempotency-Key, or GET /api/tasks/%s",
			s.ID, dispatch.ErrHandedOff, s.ID)
	case reasonKeyTaken:
		return api.CommandResponse{}, fmt.Errorf("task %s not started: %w", s.ID, store.ErrKeyTaken)
	case reasonNotRecorded:
		return api.CommandResponse{}, context.Cause(s.ctx)
	case reasonAdoptedElsewhere:
		// Not "failed": the node that adopted it may run the command yet.
		return api.CommandResponse{}, fmt.Errorf("task %s: %w: this node lost its cluster lease, and the node that adopted the task runs it on, so how it ends is not known here; GET /api/tasks/%s",
			s.ID, store.ErrAdopted, s.ID)
	}
	return out.Result, nil
}

// sameOwner reports whether two requesters are the same owner of a
// session: the same client of the same identity, whichever of its tokens
// it uses now.
func sameOwner(a, b api.Requester) bool {
	a.TokenID, b.TokenID = "", ""
	return a == b
}

// execute runs s with r to its end, records the outcome, and only then
// tells anyone: its end event, then tell, if not nil, unless the requester
// is gone.
func execute[R any](m *SessionManager, s *Session, r runner[R], tell func(outcome[R], *slog.Logger)) outcome[R] {
	defer m.release(s)
	log := lazylog.New(m.log, func() []any { return []any{"session_id", s.ID, "device", s.DeviceID, "task_name", s.TaskName} })
	s.started.Store(true)
	if s.persisted {
		err := m.unrecorded.Record(context.Background(), unrecorded.Write{What: "start of session " + s.ID, Size: unrecorded.FailureBytes,
			Fn: func(tx *store.Tx) error { return tx.Sessions().Start(s.ID) }})
		if err != nil {
			log.Error("session start not recorded", "err", err, "kept", errors.Is(err, store.ErrUnavailable))
		}
	}
	out := r.run(s.ctx, sessionStepper{m: m, s: s})
	if reason := s.cancelReason(); recordsNothingHere(reason) {
		// Its new owner records its end, and tells; or it never started.
		log.Warn("session left to another node to run on, or never started here", "reason", reason)
		s.events.Leave()
		return out
	}
	// A single command's outcome, recorded with the command, stands as is.
	if !out.recorded {
		out = settle(s, out)
		if err := persistEnd(m, s, out); err != nil {
			log.Error("session outcome not recorded", "err", err, "kept", errors.Is(err, store.ErrUnavailable))
		}
	}
	m.metrics.SessionEnded(string(out.state))
	level := slog.LevelInfo
	if s.Kind == api.KindCommand {
		level = slog.LevelDebug // its command's "command done" says it at info
	}
	log.Log(level, "session ended", "state", out.state, "err", out.err, "reason", s.cancelReason())
	s.events.Add(api.TaskEvent{Type: api.EventEnd, SessionID: s.ID, State: out.state, Status: string(taskEndStatus(out.state)), Result: out.Result, Error: out.err})
	if tell != nil && s.cancelReason() != reasonConstellationDisconnected {
		tell(out, log.Slog())
	}
	return out
}

// sendTaskEnd tells the requester how the plan session s ended. A result
// too big for one frame goes without the steps' results, with a note
// saying where the whole result is: the store keeps it whole.
func sendTaskEnd(s *Session, out outcome[api.PlanResult], taskEnd TaskEndFunc, log *slog.Logger) {
	msg := &protocol.ServerMessage{
		Type: protocol.ServerTaskEnd, Status: taskEndStatus(out.state), SessionID: s.ID, TaskName: s.TaskName,
		Result: out.Result, Error: out.err, Timestamp: protocol.Now(), ResponseID: uuid.NewString(),
	}
	err := taskEnd(msg)
	if errors.Is(err, protocol.ErrTooBig) {
		log.Warn("task_end too big for a frame; sending it without the steps' results", "err", err)
		msg.Result = out.Result.WithoutResults(fmt.Sprintf("the steps' results are too big for one frame (%v); "+
			"GET /api/tasks/%s or /api/task_result/%s has them whole", err, s.ID, s.TaskName))
		err = taskEnd(msg)
	}
	if err != nil {
		log.Warn("task_end not delivered; the result is kept", "err", err)
	}
}

// settle gives a runner's outcome its final state: a cancelled session
// that did not complete is cancelled (failed at shutdown), and any state
// other than completed, failed or cancelled fails.
func settle[R any](s *Session, out outcome[R]) outcome[R] {
	if reason := s.cancelReason(); reason != "" && out.state != api.StateCompleted {
		out.state, out.err = api.StateCancelled, cancelMessage(reason, s.DeviceID)
		if reason == reasonServerShutdown {
			out.state = api.StateFailed
		}
		return out
	}
	if out.state != api.StateCompleted && out.state != api.StateFailed && out.state != api.StateCancelled {
		out.state, out.err = api.StateFailed, "session ended in unknown state"
	}
	return out
}

// persistEnd records how s ended, now or as soon as the store can take
// it. The session of a single command that never recorded its command is
// recorded here, as it ends.
func persistEnd[R any](m *SessionManager, s *Session, out outcome[R]) error {
	row, err := out.endRow(s.row(api.StateRunning))
	if err != nil {
		return err
	}
	return m.unrecorded.Record(context.Background(), unrecorded.Write{What: "end of session " + s.ID,
		Size: int64(unrecorded.FailureBytes + len(row.Plan) + len(row.Result)),
		Fn:   func(tx *store.Tx) error { return tx.Sessions().End(row) }})
}

// release forgets a session that has ended, or was never started.
func (m *SessionManager) release(s *Session) {
	s.released.Do(func() {
		m.mu.Lock()
		if m.live[s.ID] == s { // else a run of it that this node adopted since replaced it
			delete(m.live, s.ID)
		}
		if !recordsNothingHere(s.cancelReason()) { // else its events are read from the store
			m.recent.Keep(s.ID, s.events, time.Now())
		}
		m.mu.Unlock()
		s.cancel(errSessionEnded)
		close(s.done)
		m.wg.Done()
	})
}

// errSessionEnded ends the context of a session that has ended.
var errSessionEnded = errors.New("session ended")

// ErrNotRunning: cancel_task on a session that is not running.
var ErrNotRunning = errors.New("task is not running")

// cancelTask cancels running session id on request (user_requested), and
// waits for it to end: its running step gets cancelGrace to finish first.
// The command it is running is cancelled on its device too, which stops
// the tool call; why is the cause the device records. Every surface
// cancels through here (POST /api/tasks/{id}/cancel, the MCP gateway's
// cancel_task and a client that gave up on a call): without the device's
// part, the tool would run on to its own deadline, holding a slot on the
// device, and its results would not say it was cancelled.
func (m *SessionManager) cancelTask(id, why string) error {
	m.mu.Lock()
	s := m.live[id]
	m.mu.Unlock()
	if s == nil {
		return ErrNotRunning
	}
	m.cancelOnRequest(s, why)
	<-s.done
	return nil
}

// cancelOnRequest cancels s as cancelTask does, without waiting. A
// fleet runs no command of its own: its children stop theirs as it
// cancels them.
func (m *SessionManager) cancelOnRequest(s *Session, why string) {
	if rid := s.runningCommand(); rid != "" && s.fleet == nil {
		m.disp.Stop(rid, why)
	}
	m.cancelSession(s, reasonUserRequested)
}

func (m *SessionManager) cancelSession(s *Session, reason string) {
	m.log.Info("cancelling session", "session_id", s.ID, "device", s.DeviceID, "reason", reason)
	s.setReason(reason)
	s.cancel(errors.New(cancelMessage(reason, s.DeviceID)))
}

// cancelWhere cancels every session for which match is true, without
// waiting for them to end.
func (m *SessionManager) cancelWhere(match func(*Session) bool, reason string) {
	m.mu.Lock()
	var todo []*Session
	for _, s := range m.live {
		if match(s) {
			todo = append(todo, s)
		}
	}
	m.mu.Unlock()
	for _, s := range todo {
		m.cancelSession(s, reason)
	}
}

// RequesterGone cancels the sessions a constellation asked for, without
// TASK_END: it is not there to hear it.
func (m *SessionManager) RequesterGone(clientID string) {
	m.cancelWhere(func(s *Session) bool {
		return s.Requester.Kind == api.RequesterConstellation && s.Requester.ID == clientID
	}, reasonConstellationDisconnected)
}

// DeviceGone cancels every session running on a device that is not
// coming back, plans and single commands alike: the device had its grace
// to return, and a command that outlived it would only wait for a device
// that is gone. A command whose caller asked to wait for the device goes
// on waiting, within its timeout.
func (m *SessionManager) DeviceGone(id string) {
	m.cancelWhere(func(s *Session) bool { return s.DeviceID == id && !s.waitsForDevice }, reasonDeviceDisconnected)
}

// eventsOf returns the event log of a session that is running or ended
// lately, or nil.
func (m *SessionManager) eventsOf(id string) *eventlog.Log {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.live[id]; s != nil {
		return s.events
	}
	return m.recent.Get(id, time.Now())
}

// forgetEvents drops the kept event log of a removed session.
func (m *SessionManager) forgetEvents(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recent.Forget(id)
}

// LiveSessions counts the sessions not yet ended in state, created or
// running: for metrics.
func (m *SessionManager) LiveSessions(state string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.live {
		if s.started.Load() == (state == string(api.StateRunning)) {
			n++
		}
	}
	return n
}

// progressOf returns what a running fleet or plan has done so far: a
// FleetResult or a PlanResult. ok is false for a single command, or a
// session not running.
func (m *SessionManager) progressOf(id string) (res any, ok bool) {
	m.mu.Lock()
	s := m.live[id]
	m.mu.Unlock()
	switch {
	case s == nil:
		return nil, false
	case s.fleet != nil:
		return s.fleet.progress(), true
	case s.plan != nil:
		events, _, _ := s.events.Since(0)
		return planProgress(s.plan, events), true
	}
	return nil, false
}

// planProgress is where each step of a running plan is, from its events:
// pending until it starts, running while an attempt is out, then how its
// last attempt went. A step that is being retried keeps the last
// attempt's error, which is why.
func planProgress(p *plan.Plan, events []api.TaskEvent) api.PlanResult {
	res := api.PlanResult{Steps: make([]api.StepResult, len(p.Steps))}
	for i, ps := range p.Steps {
		res.Steps[i] = api.StepResult{Step: i, Tool: ps.Label(), Status: api.StepPending}
	}
	for _, e := range events {
		if e.Step == nil || *e.Step < 0 || *e.Step >= len(res.Steps) {
			continue
		}
		st := &res.Steps[*e.Step]
		switch e.Type {
		case api.EventStepStart:
			st.Status, st.Attempts, st.ResponseID = api.StepRunning, e.Attempt, e.ResponseID
		case api.EventStepEnd:
			st.Status, st.Attempts, st.Error, st.Results = e.Status, e.Attempt, e.Error, e.Results
		}
	}
	return res
}

// ended waits until session id has ended, wherever it runs (here, or on
// another node of a cluster, whose end it reads from the store), and
// returns its row, or ctx's cause; waiting, if not nil, is told once if
// it has to wait.
func (m *SessionManager) ended(ctx context.Context, id string, waiting func(store.Session)) (store.Session, error) {
	wait := 10 * time.Millisecond
	for {
		row, err := m.store.Sessions().Get(ctx, id)
		if err != nil || api.TaskState(row.State).Ended() {
			return row, err
		}
		if waiting != nil {
			waiting(row)
			waiting = nil
		}
		if live := m.liveSession(id); live != nil {
			select {
			case <-live.done:
				continue
			case <-ctx.Done():
				return row, context.Cause(ctx)
			}
		}
		if !sleep(ctx, wait) {
			return row, context.Cause(ctx)
		}
		wait = min(2*wait, time.Second)
	}
}

// liveSession returns the session id if it is running here, or nil.
func (m *SessionManager) liveSession(id string) *Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[id]
}

// running reports whether the session is running here.
func (m *SessionManager) running(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[id] != nil
}

// CancelAll refuses new sessions and cancels the running ones, for a
// server that is stopping. wait then waits until each has recorded its end.
func (m *SessionManager) CancelAll() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancelWhere(func(*Session) bool { return true }, reasonServerShutdown)
}

func (m *SessionManager) Wait() { m.wg.Wait() }

// LiveIDs lists the sessions running now.
func (m *SessionManager) LiveIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.live))
}

// HoldForTest keeps the manager from starting, ending, or refusing any
// session until release is called (once; a second call does nothing):
// for tests of what waits on it, such as a node that drains.
func (m *SessionManager) HoldForTest() (release func()) {
	m.mu.Lock()
	return sync.OnceFunc(m.mu.Unlock)
}

// RefuseNew makes the manager refuse new tasks (ErrDraining), for a node
// that drains.
func (m *SessionManager) RefuseNew() {
	m.mu.Lock()
	m.draining = true
	m.mu.Unlock()
}

// Drain waits, once refuseNew has been called, until every session
// running has ended, or grace has passed, or ctx ends; it reports how
// many still run.
func (m *SessionManager) Drain(ctx context.Context, grace time.Duration) int {
	deadline := time.Now().Add(grace)
	for {
		m.mu.Lock()
		n := len(m.live)
		m.mu.Unlock()
		if n == 0 || !time.Now().Before(deadline) || !sleep(ctx, min(50*time.Millisecond, time.Until(deadline))) {
			return n
		}
	}
}

// HandOff stops every session running here without recording its end or
// any more of its commands, for the node that adopts it to run it on
// from its last recorded step (the node then says so: cluster.PublishHandoff).
// It refuses new sessions, and returns how many it stopped.
func (m *SessionManager) HandOff() int {
	m.mu.Lock()
	m.closed = true
	live := slices.Collect(maps.Values(m.live))
	m.mu.Unlock()
	// Handed off before their commands end: freezing ends each waiting
	// command as failed, and a session that saw its step fail before it
	// was cancelled would end failed, recorded as such, and never be
	// adopted.
	for _, s := range live {
		s.setReason(reasonHandedOff)
	}
	m.disp.Freeze()
	m.cancelWhere(func(*Session) bool { return true }, reasonHandedOff)
	m.Wait()
	return len(live)
}

// ExpireResults deletes, every tick until stop, what finished more than
// ResultTTL ago, the idempotency keys older than IdempotencyKeyTTL, and
// the tokens and logins that have expired.
func (m *SessionManager) ExpireResults(stop <-chan struct{}) {
	every := min(max(m.cfg.ResultTTL/4, 10*time.Millisecond), time.Hour)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		m.Expire(time.Now())
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// Expire deletes, as of now, the sessions that finished more than
// ResultTTL ago and the idempotency keys recorded more than
// IdempotencyKeyTTL ago: a repeat under one is then a new request. It
// also deletes the tokens and logins that have expired, which the store
// already refuses.
func (m *SessionManager) Expire(now time.Time) {
	var sessions, keys, credentials int
	err := m.store.Write(context.Background(), func(tx *store.Tx) (err error) {
		if sessions, err = tx.Sessions().DeleteFinishedBefore(now.Add(-m.cfg.ResultTTL)); err != nil {
			return err
		}
		if credentials, err = tx.Identities().DeleteExpiredCredentials(now); err != nil {
			return err
		}
		keys, err = tx.IdempotencyKeys().DeleteBefore(now.Add(-IdempotencyKeyTTL))
		return err
	})
	switch {
	case err != nil:
		m.log.Error("expired results not removed", "err", err)
	case sessions+keys+credentials > 0:
		m.log.Info("expired results removed", "sessions", sessions, "older_than", m.cfg.ResultTTL,
			"idempotency_keys", keys, "keys_older_than", IdempotencyKeyTTL, "tokens_and_logins", credentials)
	}
}
