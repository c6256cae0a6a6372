package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/google/uuid"
)

// LocalCall is one tool call an application on the device asked for,
// through the agent's own MCP endpoint.
type LocalCall struct {
	// Action is the call: the tool, its type and its parameters. Its
	// call_id is the executor's to give.
	Action protocol.Command
	// Caller names the application, as it named itself to the endpoint,
	// and how it came: what the audit log shows as who asked.
	Caller string
}

// errLocalShutdown fails a local call that comes while the agent stops.
var errLocalShutdown = errors.New("agent shutting down: the call was not run")

// RunLocal runs a local call as a command from the server runs: on the
// default Computer, through the Router (the tool's input schema, policy,
// limits and fuel), in one of the command slots, and it is waited for, or
// canceled, at shutdown. ctx ends it: the application cancelled it or
// went away. The call is logged and reported to the server, through the
// outbox, in a local_call message, which goes out when the link is up.
func (e *Executor) RunLocal(ctx context.Context, call LocalCall) protocol.Result {
	call.Action.CallID = "local-" + uuid.NewString()
	log := e.log.With("local_call_id", call.Action.CallID, "caller", call.Caller, "tool", call.Action.ToolName)
	started := time.Now()
	res := e.runLocal(ctx, call, log)
	res.CallID = call.Action.CallID
	log.Info("local call done", "status", res.Status, "error", res.Error, "took", time.Since(started).Round(time.Microsecond))
	e.reportLocal(call, res, started, log)
	return res
}

// runLocal runs call in a slot, unless the agent is shutting down.
func (e *Executor) runLocal(ctx context.Context, call LocalCall, log *slog.Logger) protocol.Result {
	e.admitMu.Lock()
	if isClosed(e.draining) {
		e.admitMu.Unlock()
		return protocol.Result{Status: protocol.ResultFailure, Error: errLocalShutdown.Error()}
	}
	e.jobs.Add(1)
	e.admitMu.Unlock()
	defer e.jobs.Done()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(e.jobsCtx, func() { cancel(context.Cause(e.jobsCtx)) })
	defer stop()
	select {
	case e.slots <- struct{}{}:
		defer func() { <-e.slots }()
	case <-ctx.Done():
		return protocol.Result{Status: protocol.ResultFailure, Error: fmt.Sprintf("not run: %v", context.Cause(ctx))}
	}
	return e.router.WithLogger(log).Execute(ctx, computer.Target{}, []protocol.Command{call.Action}, true)[0]
}

// reportLocal records the local_call message that reports call, for the
// link to deliver: the call and how it ended, without the result's value,
// which is the application's, not the audit log's. A report larger than a
// frame leaves the parameters out, saying how large they were.
func (e *Executor) reportLocal(call LocalCall, res protocol.Result, started time.Time, log *slog.Logger) {
	res.Result = nil
	m := &protocol.ClientMessage{
		Type: protocol.ClientLocalCall, Status: protocol.StatusOK, ClientID: e.deviceID,
		RequestID: uuid.NewString(), PrevResponseID: call.Action.CallID,
		Actions: []protocol.Command{call.Action}, ActionResults: []protocol.Result{res},
		Metadata:  map[string]any{"caller": call.Caller, "started": started.UTC().Format(time.RFC3339Nano)},
		Timestamp: protocol.Now(),
	}
	if n, err := e.cap.Size(m); err == nil && n > e.cap.Max {
		params, _ := e.cap.Size(call.Action.Parameters)
		m.Actions[0].Parameters = map[string]any{"omitted": fmt.Sprintf("%d bytes of parameters: the report would not fit in a frame", params)}
	}
	r, err := e.cap.Fit(m, log)
	if err != nil {
		log.Warn("local call not reported to the server", "err", err)
		return
	}
	if err := e.outbox.Complete(r); err != nil {
		log.Error("local call report not recorded; delivering it from memory", "err", err)
	}
}
