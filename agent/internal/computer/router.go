package computer

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/edgeaip/edgeaip/protocol"
)

// skippedError is what an action skipped by early exit says, as in UFO.
const skippedError = "skipped due to previous failure"

// skippedInvalid is what the other actions of a command with an invalid
// action say, with early exit: UFO's words, and the invalid action,
// counted from 1 as steps are.
func skippedInvalid(n int, tool string) string {
	return fmt.Sprintf("%s: action %d (%s) failed validation", skippedError, n, tool)
}

// Router is UFO's CommandRouter: it executes the actions of one COMMAND,
// in order, on the Computer the command is for.
type Router struct {
	computers *Manager
	log       *slog.Logger
}

// NewRouter returns a Router over the Computers of m.
func NewRouter(m *Manager, log *slog.Logger) *Router { return &Router{computers: m, log: log} }

// Execute runs actions on the Computer of target and returns one Result
// per action, in the same order and with the same call_id. It never fails
// as a whole: an unknown agent_name, an unknown tool or bad parameters are
// failure Results that say so.
//
// Every action is resolved and its parameters checked against the tool's
// input schema before any runs. With earlyExit, a command with an invalid
// action runs nothing, and after an action fails the rest are skipped.
// Without it, each action stands alone. An action whose tool is deployed
// again while the command runs (by an earlier action, or by another
// command) runs on the new version.
func (r *Router) Execute(ctx context.Context, target Target, actions []protocol.Command, earlyExit bool) []protocol.Result {
	c, release, err := r.computers.acquire(ctx, target)
	defer release()
	if err != nil {
		return protocol.FailAll(protocol.CallIDs(actions), err.Error())
	}
	prepared := make([]registered, len(actions))
	invalid := make([]error, len(actions))
	firstInvalid := -1
	for i, a := range actions {
		prepared[i], invalid[i] = c.prepare(a)
		if invalid[i] != nil && firstInvalid < 0 {
			firstInvalid = i
		}
	}
	results := make([]protocol.Result, len(actions))
	failed := false
	for i, a := range actions {
		var res protocol.Result
		switch {
		case invalid[i] != nil:
			res = Failure(invalid[i])
		case earlyExit && firstInvalid >= 0:
			res = protocol.Result{Status: protocol.ResultSkipped, Error: skippedInvalid(firstInvalid+1, actions[firstInvalid].ToolName)}
		case earlyExit && failed:
			res = protocol.Result{Status: protocol.ResultSkipped, Error: skippedError}
		case ctx.Err() != nil:
			res = Failure(context.Cause(ctx))
		default:
			res = r.run(ctx, prepared[i], a)
		}
		res.CallID = a.CallID
		failed = failed || res.Status == protocol.ResultFailure
		results[i] = res
	}
	return results
}

// WithLogger returns a copy of r that logs to log: a command's router
// logs with the command's ids.
func (r *Router) WithLogger(log *slog.Logger) *Router {
	c := *r
	c.log = log
	return &c
}

func (r *Router) run(ctx context.Context, t registered, cmd protocol.Command) protocol.Result {
	res := t.tool.Call(ctx, cmd.Parameters)
	res.Namespace = t.info.Namespace
	r.log.Info("action done", "tool", t.info.ToolKey, "namespace", t.info.Namespace, "action_call_id", cmd.CallID,
		"status", res.Status, "error", res.Error)
	return res
}
