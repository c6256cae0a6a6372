package agent

import (
	"context"
	"log/slog"
	"strings"

	"github.com/edgeaip/edgeaip/protocol"
)

// skippedError is what a skipped action's Result says.
const skippedError = "skipped due to previous failure"

// Router is UFO's CommandRouter: it executes the actions of one COMMAND in
// order on a Computer.
type Router struct {
	computer *Computer
	log      *slog.Logger
}

// Execute runs the actions in order and returns one Result per action, in
// the same order and with the same call_id. With earlyExit, every action
// after a failure is skipped.
func (r *Router) Execute(ctx context.Context, actions []protocol.Command, earlyExit bool) []protocol.Result {
	results := make([]protocol.Result, len(actions))
	failed := false
	for i, cmd := range actions {
		var res protocol.Result
		switch {
		case failed && earlyExit:
			res = protocol.Result{Status: protocol.ResultSkipped, Error: skippedError}
		case ctx.Err() != nil:
			res = failure(context.Cause(ctx))
		default:
			res = r.run(ctx, cmd)
		}
		res.CallID = cmd.CallID
		failed = failed || res.Status == protocol.ResultFailure
		results[i] = res
	}
	return results
}

// withLogger returns a copy of r that logs to log: a command's router
// logs with the command's ids.
func (r *Router) withLogger(log *slog.Logger) *Router {
	c := *r
	c.log = log
	return &c
}

// joinCallIDs joins the call_ids of actions, for a log line.
func joinCallIDs(actions []protocol.Command) string {
	ids := make([]string, len(actions))
	for i, a := range actions {
		ids[i] = a.CallID
	}
	return strings.Join(ids, ",")
}

func (r *Router) run(ctx context.Context, cmd protocol.Command) protocol.Result {
	t, err := r.computer.resolve(cmd)
	if err != nil {
		return failure(err)
	}
	res := t.call(ctx, cmd.Parameters)
	res.Namespace = t.info().Namespace
	r.log.Info("action done", "tool", cmd.ToolName, "call_id", cmd.CallID, "status", res.Status, "error", res.Error)
	return res
}
