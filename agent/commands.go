package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/google/uuid"
)

// flushTimeout bounds how long shutdown waits for the outbox to drain.
const flushTimeout = 5 * time.Second

// errShuttingDown is the cause of the cancellation of commands still
// running when the shutdown grace period ends.
var errShuttingDown = errors.New("agent shutting down: the command was canceled")

// onCommand takes a COMMAND from the read loop. It never blocks: the
// command runs in the background, after the earlier commands of its
// session, when one of MaxConcurrentCommands slots is free. A command the
// agent already ran is answered from the outbox, and one it is running is
// left to finish; neither runs twice.
func (a *Agent) onCommand(m *protocol.ServerMessage) {
	log := a.commandLog(m.SessionID, m.ResponseID, protocol.CallIDs(m.Actions))
	if m.ResponseID == "" {
		log.Warn("command without a response_id not run: its results could not be matched")
		return
	}
	a.admitMu.Lock()
	defer a.admitMu.Unlock()
	if isClosed(a.draining) {
		log.Info("command not taken: the agent is shutting down")
		return
	}
	switch a.outbox.admit(m.ResponseID) {
	case admitRunning:
		log.Info("command already running; its results will follow")
		return
	case admitDone:
		log.Info("command already done; sending its results again")
		notify(a.wake)
		return
	}
	log.Info("command received", "actions", len(m.Actions))
	a.jobs.Add(1)
	a.sessions.enqueue(sessionKey(m), func() {
		defer a.jobs.Done()
		a.runCommand(m, log)
	})
}

// commandLog is the agent's log for one command: every line about it
// names its device (a.log's), session, response and call ids.
func (a *Agent) commandLog(sessionID, responseID string, callIDs []string) *slog.Logger {
	return withCommand(a.log, sessionID, responseID, callIDs)
}

// withCommand is log for one command, naming the ids an operator greps
// for: its session, response and call ids.
func withCommand(log *slog.Logger, sessionID, responseID string, callIDs []string) *slog.Logger {
	return log.With("session_id", sessionID, "response_id", responseID, "call_id", protocol.JoinCallIDs(callIDs))
}

// withReply is log for the results r carries: their command's ids, and
// r's request_id, which the server's ack or refusal names.
func withReply(log *slog.Logger, r *protocol.ClientMessage) *slog.Logger {
	return withCommand(log, r.SessionID, r.PrevResponseID, protocol.ResultCallIDs(r.ActionResults)).With("request_id", r.RequestID)
}

// sessionKey orders the commands of one session; a command without a
// session is a session of its own.
func sessionKey(m *protocol.ServerMessage) string {
	if m.SessionID == "" {
		return "response:" + m.ResponseID
	}
	return "session:" + m.SessionID
}

// runCommand records the command as accepted, runs it, and records its
// results. A command still waiting for a slot when shutdown begins is not
// taken: it leaves no trace, and the server sends it again.
func (a *Agent) runCommand(m *protocol.ServerMessage, log *slog.Logger) {
	if results, taken := a.execute(m, log); taken {
		a.finish(m, results, log)
	}
}

// execute runs m in one of the slots, which it holds only while the tools
// run: recording the results, an fsync, needs none.
func (a *Agent) execute(m *protocol.ServerMessage, log *slog.Logger) (results []protocol.Result, taken bool) {
	select {
	case a.slots <- struct{}{}:
		defer func() { <-a.slots }()
	case <-a.draining:
	}
	if isClosed(a.draining) {
		a.outbox.forget(m.ResponseID)
		log.Info("command not started: the agent is shutting down")
		return nil, false
	}
	if err := a.outbox.accept(acceptedOf(m)); err != nil {
		log.Error("command not run: it could not be recorded", "err", err)
		return protocol.FailAll(protocol.CallIDs(m.Actions), fmt.Sprintf("the agent could not record the command, so it did not run it: %v", err)), true
	}
	return a.router.withLogger(log).Execute(a.jobsCtx, targetOf(m), m.Actions, true), true
}

// finish records a command's results and hands them to delivery. What is
// recorded is what can be sent: results that would make the reply larger
// than a frame are failures that say so.
func (a *Agent) finish(m *protocol.ServerMessage, results []protocol.Result, log *slog.Logger) {
	reply := a.frames.fit(a.commandResults(m.SessionID, m.ResponseID, m.Status, results))
	for i, r := range reply.ActionResults {
		if r.Error != results[i].Error {
			log.Warn("result too large for the link; a failure goes in its place", "action_call_id", r.CallID, "error", r.Error)
		}
	}
	if err := a.outbox.complete(reply); err != nil {
		log.Error("results not recorded; delivering them from memory", "err", err)
	}
	notify(a.wake)
}

// commandResults is the COMMAND_RESULTS message answering response_id.
func (a *Agent) commandResults(sessionID, responseID string, status protocol.TaskStatus, results []protocol.Result) *protocol.ClientMessage {
	if status == "" {
		status = protocol.StatusContinue
	}
	return &protocol.ClientMessage{
		Type:           protocol.ClientCommandResults,
		Status:         status,
		ClientID:       a.cfg.ID,
		SessionID:      sessionID,
		RequestID:      uuid.NewString(),
		PrevResponseID: responseID,
		ActionResults:  results,
		Timestamp:      protocol.Now(),
	}
}

// shutdown stops taking commands, lets those in flight finish within the
// grace period and cancels the rest, then flushes the outbox.
func (a *Agent) shutdown() {
	a.admitMu.Lock()
	close(a.draining)
	a.admitMu.Unlock()
	a.log.Info("shutting down: taking no new commands", "grace", a.cfg.ShutdownGrace)
	if !waitTimeout(&a.jobs, a.cfg.ShutdownGrace) {
		a.log.Warn("commands still running after the grace period; canceling them")
		a.cancelJobs(errShuttingDown)
		a.jobs.Wait()
	}
	a.flush()
}

// flush waits, up to flushTimeout, for the server to acknowledge every
// result in the outbox; or, from a server that has acknowledged none (a
// UFO server does not), for every result to have gone out. With the link
// down there is nothing to wait for: the results stay in the outbox.
func (a *Agent) flush() {
	deadline := time.Now().Add(flushTimeout)
	for {
		conn, link := a.currentLink()
		n := len(a.outbox.unsent(link))
		if a.serverAcks.Load() {
			n = a.outbox.undelivered()
		}
		if n == 0 {
			return
		}
		if conn == nil || time.Now().After(deadline) {
			a.log.Warn("results left unacknowledged in the outbox; they go out after the next start", "count", n)
			return
		}
		notify(a.wake)
		time.Sleep(20 * time.Millisecond)
	}
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	return waitClosed(done, d)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
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

// deliver sends the outbox's results on the registered link whenever it is
// woken: after a result is recorded, after a registration, and when a
// COMMAND arrives for results already sent. It is the only sender of
// results, so none goes out twice on one link unasked. The server's ack of
// each (see handle) marks it delivered.
func (a *Agent) deliver(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		}
		conn, link := a.currentLink()
		if conn == nil {
			continue
		}
		for _, p := range a.outbox.unsent(link) {
			err := a.send(ctx, conn, p.reply)
			if errors.Is(err, protocol.ErrTooBig) {
				a.tooBigToSend(p, link, err, func(n int64) error {
					return fmt.Errorf("results of %d bytes exceed the link's frame cap of %d bytes", n, a.frames.max)
				})
				continue
			}
			if err != nil {
				a.replyLog(p.reply).Warn("results not delivered; they wait in the outbox", "err", err)
				break
			}
			a.outbox.markSent(p, link)
		}
	}
}

// tooBigToSend handles results the link refused as larger than a frame,
// though they were made to fit when recorded: the frame cap is lower than
// it was then, or the link grew them (it replaces invalid UTF-8). They are
// not sent again on this link, whatever follows, so that they hold up no
// other results. If failures in their place are smaller, those are
// recorded and go out instead; if not, nothing can be sent for them, and
// they stay in the outbox until they age out.
//
// why says what went wrong for results of n bytes, for the failures.
func (a *Agent) tooBigToSend(p pendingReply, link uint64, sendErr error, why func(n int64) error) {
	a.outbox.markSent(p, link)
	log := a.replyLog(p.reply)
	n, err := a.frames.size(p.reply)
	if err != nil {
		log.Error("results cannot be sent; they stay in the outbox", "err", err)
		return
	}
	failed := failAll(p.reply, why(n))
	if m, err := a.frames.size(failed); err != nil || m >= n {
		log.Error("results cannot be sent, even as failures; they stay in the outbox", "err", sendErr)
		return
	}
	log.Error("results too large for the link; failures go out in their place", "err", sendErr)
	if err := a.outbox.complete(failed); err != nil {
		log.Error("results not recorded; delivering them from memory", "err", err)
	}
	notify(a.wake)
}

// refusedAsTooBig handles a server that closed link with 1009 because a
// frame was larger than it takes: its frame cap is below the agent's. The
// largest results that went out on link and were not acknowledged are the
// ones it refused, or larger still and so refused too; failures go out in
// their place, rather than the same results first on every new link.
func (a *Agent) refusedAsTooBig(link uint64, closeErr error) {
	p, ok := a.outbox.largestSentOn(link)
	if !ok {
		return
	}
	a.tooBigToSend(p, link, closeErr, func(n int64) error {
		return fmt.Errorf("results of %d bytes are more than the server takes in a frame (it closed the link with 1009)", n)
	})
}

// replyLog is the agent's log for the results r carries.
func (a *Agent) replyLog(r *protocol.ClientMessage) *slog.Logger { return withReply(a.log, r) }

// pruneOutbox drops aged-out results.
func (a *Agent) pruneOutbox(now time.Time) {
	if err := a.outbox.prune(now); err != nil {
		a.log.Error("outbox not pruned", "err", err)
	}
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func(now time.Time)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			f(now)
		}
	}
}
