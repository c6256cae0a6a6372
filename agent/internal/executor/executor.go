// Package executor runs the commands the server sends: it admits each
// COMMAND once (the outbox answers a copy of one it ran), queues it behind
// the earlier commands of its session, runs it in one of a bounded number
// of slots after recording it, and records its results, encoded once and
// made to fit a frame, for the link to deliver. On shutdown it takes no
// new commands and gives those running a grace period.
package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/agent/internal/outbox"
	"github.com/edgeaip/edgeaip/agent/internal/reply"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/google/uuid"
)

// errShuttingDown is the cause of the cancellation of commands still
// running when the shutdown grace period ends.
var errShuttingDown = errors.New("agent shutting down: the command was canceled")

// errRestarted is the failure of a command that was running when the agent
// died. It is reported, never run again.
var errRestarted = errors.New("agent restarted while the command ran")

// Executor runs commands. It is safe for concurrent use.
type Executor struct {
	deviceID string
	grace    time.Duration // for commands in flight at shutdown
	outbox   *outbox.Outbox
	router   *computer.Router
	cap      reply.Cap // of the link, which results are encoded for
	tell     func(context.Context, *protocol.ClientMessage)
	log      *slog.Logger

	slots    chan struct{} // one per command allowed to run
	sessions sessionQueues
	// cancels stops each command admitted and not yet finished, by its
	// response_id: the server may cancel it.
	cancels commandCancels

	// admitMu orders the admission of commands against the start of
	// shutdown, so that no job is added once shutdown waits for them.
	admitMu    sync.Mutex
	draining   chan struct{} // closed when shutdown begins
	jobs       sync.WaitGroup
	jobsCtx    context.Context // ends when shutdown gives up waiting
	cancelJobs context.CancelCauseFunc
}

// Options are an Executor's settings.
type Options struct {
	DeviceID      string        // the client_id of its results
	MaxConcurrent int           // commands that run at once
	Grace         time.Duration // for commands in flight at shutdown
	// Tell sends the server a notice about a command (its tool's
	// preparation), if the link is up and carries it.
	Tell func(context.Context, *protocol.ClientMessage)
}

// New returns an Executor that records commands and their results in ob,
// runs them with router and encodes their results under cap.
func New(opts Options, ob *outbox.Outbox, router *computer.Router, cap reply.Cap, log *slog.Logger) *Executor {
	e := &Executor{
		deviceID: opts.DeviceID, grace: opts.Grace, outbox: ob, router: router, cap: cap, tell: opts.Tell, log: log,
		slots:    make(chan struct{}, opts.MaxConcurrent),
		draining: make(chan struct{}),
	}
	e.jobsCtx, e.cancelJobs = context.WithCancelCause(context.Background())
	return e
}

// Admit takes a COMMAND from the read loop. It never blocks: the command
// runs in the background, after the earlier commands of its session, when
// one of the slots is free. A command the agent already ran is answered
// from the outbox, and one it is running is left to finish; neither runs
// twice.
func (e *Executor) Admit(m *protocol.ServerMessage) {
	log := reply.CommandLog(e.log, m.SessionID, m.ResponseID, protocol.CallIDs(m.Actions))
	if m.ResponseID == "" {
		log.Warn("command without a response_id not run: its results could not be matched")
		return
	}
	e.admitMu.Lock()
	defer e.admitMu.Unlock()
	if isClosed(e.draining) {
		log.Info("command not taken: the agent is shutting down")
		return
	}
	switch e.outbox.Admit(m.ResponseID) {
	case outbox.AdmitRunning:
		log.Info("command already running; its results will follow")
		return
	case outbox.AdmitDone:
		log.Info("command already done; sending its results again")
		return
	}
	first := ""
	if len(m.Actions) > 0 {
		first = m.Actions[0].ToolName
	}
	log.Info("command received", "actions", len(m.Actions), "first_tool", first)
	e.jobs.Add(1)
	ctx := e.cancels.add(e.jobsCtx, m.ResponseID)
	e.sessions.enqueue(sessionKey(m), func() {
		defer e.jobs.Done()
		defer e.cancels.remove(m.ResponseID)
		e.run(ctx, m, log)
	})
}

// Cancel stops the command responseID, which the server no longer wants:
// its running action is canceled, the rest skipped, and its results say
// why. A command not admitted, or finished, is left alone.
func (e *Executor) Cancel(responseID, why string) {
	if e.cancels.cancel(responseID, fmt.Errorf("cancelled by the server: %s", why)) {
		e.log.Info("command cancelled by the server", "response_id", responseID, "why", why)
	}
}

// sessionKey orders the commands of one session; a command without a
// session is a session of its own.
func sessionKey(m *protocol.ServerMessage) string {
	if m.SessionID == "" {
		return "response:" + m.ResponseID
	}
	return "session:" + m.SessionID
}

// run records the command as accepted, runs it, and records its results.
// A command still waiting for a slot when shutdown begins is not taken:
// it leaves no trace, and the server sends it again.
func (e *Executor) run(ctx context.Context, m *protocol.ServerMessage, log *slog.Logger) {
	if results, taken := e.execute(ctx, m, log); taken {
		e.finish(m.SessionID, m.ResponseID, m.Status, results, log)
	}
}

// execute runs m in one of the slots, which it holds only while the tools
// run: recording the results, an fsync, needs none.
func (e *Executor) execute(ctx context.Context, m *protocol.ServerMessage, log *slog.Logger) (results []protocol.Result, taken bool) {
	select {
	case e.slots <- struct{}{}:
		defer func() { <-e.slots }()
	case <-e.draining:
	}
	if isClosed(e.draining) {
		e.outbox.Forget(m.ResponseID)
		log.Info("command not started: the agent is shutting down")
		return nil, false
	}
	if err := e.outbox.Accept(outbox.AcceptedOf(m)); err != nil {
		log.Error("command not run: it could not be recorded", "err", err)
		return protocol.FailAll(protocol.CallIDs(m.Actions), fmt.Sprintf("the agent could not record the command, so it did not run it: %v", err)), true
	}
	ctx = sandbox.WithPreparationTrace(ctx, func(p sandbox.Preparation) { e.tellPreparing(ctx, m, p) })
	return e.router.WithLogger(log).Execute(ctx, computer.TargetOf(m), m.Actions, true), true
}

// tellPreparing tells the server that command m, which the agent has
// accepted, waits for its tool to be prepared, and how far along that is
// (p): the server's wait for the command extends for it (server
// RATIONALE.md, "A command's deadline").
func (e *Executor) tellPreparing(ctx context.Context, m *protocol.ServerMessage, p sandbox.Preparation) {
	if e.tell == nil {
		return
	}
	e.tell(ctx, &protocol.ClientMessage{
		Type: protocol.ClientPreparing, Status: protocol.StatusContinue, ClientID: e.deviceID, SessionID: m.SessionID,
		PrevResponseID: m.ResponseID, Timestamp: protocol.Now(),
		Preparing: &protocol.Preparing{ToolName: p.Tool, Stage: string(p.Stage), Step: uint32(p.Step), Steps: uint32(p.Steps)},
	})
}

// finish encodes a command's results once, as the link sends them, and
// records those bytes, which queues them for delivery. What is recorded is
// what can be sent: results that would make the reply larger than a frame
// are failures that say so.
func (e *Executor) finish(sessionID, responseID string, status protocol.TaskStatus, results []protocol.Result, log *slog.Logger) {
	r, err := e.cap.Fit(e.commandResults(sessionID, responseID, status, results), log)
	if err != nil {
		log.Error("results cannot be encoded; the command is reported failed after a restart", "err", err)
		return
	}
	if err := e.outbox.Complete(r); err != nil {
		log.Error("results not recorded; delivering them from memory", "err", err)
	}
}

// commandResults is the COMMAND_RESULTS message answering responseID.
func (e *Executor) commandResults(sessionID, responseID string, status protocol.TaskStatus, results []protocol.Result) *protocol.ClientMessage {
	if status == "" {
		status = protocol.StatusContinue
	}
	return &protocol.ClientMessage{
		Type:           protocol.ClientCommandResults,
		Status:         status,
		ClientID:       e.deviceID,
		SessionID:      sessionID,
		RequestID:      uuid.NewString(),
		PrevResponseID: responseID,
		ActionResults:  results,
		Timestamp:      protocol.Now(),
	}
}

// ReportInterrupted answers, from the outbox, the commands that were
// running when the agent last died: each of their calls failed; and
// reports the local calls that were as failed.
func (e *Executor) ReportInterrupted(cmds []outbox.Accepted) {
	for _, c := range cmds {
		if c.Local != nil {
			e.reportInterruptedLocal(c)
			continue
		}
		log := reply.CommandLog(e.log, c.SessionID, c.ResponseID, c.CallIDs)
		log.Warn("command was running when the agent died; reporting it as failed")
		e.finish(c.SessionID, c.ResponseID, c.Status, protocol.FailAll(c.CallIDs, errRestarted.Error()), log)
	}
}

// Shutdown stops taking commands, and lets those in flight finish within
// the grace period, then cancels the rest and waits for them.
func (e *Executor) Shutdown() {
	e.admitMu.Lock()
	close(e.draining)
	e.admitMu.Unlock()
	e.log.Info("shutting down: taking no new commands", "grace", e.grace)
	if !waitTimeout(&e.jobs, e.grace) {
		e.log.Warn("commands still running after the grace period; canceling them")
		e.cancelJobs(errShuttingDown)
		e.jobs.Wait()
	}
}

// waitTimeout waits up to d for wg and says whether it is done.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// commandCancels holds the cancel function of each command admitted and
// not yet finished.
type commandCancels struct {
	mu sync.Mutex
	m  map[string]context.CancelCauseFunc
}

// add returns the context command responseID runs in, under parent.
func (c *commandCancels) add(parent context.Context, responseID string) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]context.CancelCauseFunc{}
	}
	c.m[responseID] = cancel
	return ctx
}

// remove forgets a finished command.
func (c *commandCancels) remove(responseID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cancel, ok := c.m[responseID]; ok {
		cancel(nil)
		delete(c.m, responseID)
	}
}

// cancel cancels command responseID with cause, and says whether it was
// there to cancel.
func (c *commandCancels) cancel(responseID string, cause error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cancel, ok := c.m[responseID]
	if ok {
		cancel(cause)
	}
	return ok
}

// sessionQueues runs the jobs of each session one after another, in the
// order they came; jobs of different sessions run concurrently.
type sessionQueues struct {
	mu     sync.Mutex
	queues map[string][]func()
}

func (q *sessionQueues) enqueue(key string, job func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queues == nil {
		q.queues = map[string][]func(){}
	}
	pending := q.queues[key]
	q.queues[key] = append(pending, job)
	if len(pending) == 0 {
		go q.work(key)
	}
}

func (q *sessionQueues) work(key string) {
	for {
		q.mu.Lock()
		job := q.queues[key][0]
		q.mu.Unlock()
		job()
		q.mu.Lock()
		rest := q.queues[key][1:]
		if len(rest) == 0 {
			delete(q.queues, key)
			q.mu.Unlock()
			return
		}
		q.queues[key] = rest
		q.mu.Unlock()
	}
}
