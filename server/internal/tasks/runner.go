package tasks

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/tasks/internal/inventory"
	"github.com/edgeaip/edgeaip/server/plan"
)

// runner carries out a session's task and ends with its result R: it
// decides which steps go to the device and when the task is over.
// planRunner runs a fixed plan; an LLM planner would be another runner,
// choosing each next step from the results so far. runStep tries a step
// with its retries; everything else (resolution, timeouts, recording,
// events, cancellation) is the stepper's and the session manager's.
type runner[R any] interface {
	run(ctx context.Context, steps stepper) outcome[R]
}

// stepper makes one attempt at a step on the session's device: one
// command.
type stepper interface {
	attempt(ctx context.Context, st step, n int) dispatch.Result
	// replayed reports whether attempt n at step st was made before, by
	// the node a session was adopted from.
	replayed(st, n int) bool
}

// step is one COMMAND a runner asks for: its actions as asked for, and how
// to try it.
type step struct {
	index int // in the task, from 0
	// path is where the request gave the step: "steps[2]", or "actions"
	// for a single command.
	path    string
	calls   []inventory.Call
	timeout time.Duration
	// waitForDevice: its command waits, within its timeout, for a device
	// that is not online, rather than fail (command.waitForDevice).
	waitForDevice bool
	retries       int
	// retryWait is the wait before retry n (1 for the first).
	retryWait func(n int) time.Duration
}

// label names the step by its tools, as events and results show it, e.g.
// "hash_file" or "stock.read_file+list_dir".
func (st step) label() string {
	names := make([]string, len(st.calls))
	for i, c := range st.calls {
		names[i] = c.Label()
	}
	return strings.Join(names, "+")
}

// runStep makes attempts at st until one succeeds, its retries run out or
// ctx ends, and returns the last attempt's result and how many were made.
func runStep(ctx context.Context, steps stepper, st step) (dispatch.Result, int) {
	last, n := dispatch.Result{Err: errNotRun}, 0
	for n <= st.retries {
		if n > 0 && !steps.replayed(st.index, n+1) && !sleep(ctx, st.retryWait(n)) {
			break
		}
		if ctx.Err() != nil {
			break
		}
		n++
		if last = steps.attempt(ctx, st, n); last.Failure() == "" {
			break
		}
	}
	return last, n
}

// sleep waits d unless ctx ends first, and reports whether it waited.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// planRunner runs a plan's steps in order. A failed step ends the plan
// when early_exit says so; the steps after it are skipped. Its error
// counts steps from 1, as people do (and aipctl and the dashboard show
// them); the API's step fields count from 0.
type planRunner struct {
	plan *plan.Plan
}

func (p planRunner) run(ctx context.Context, steps stepper) outcome[api.PlanResult] {
	res := api.PlanResult{Steps: make([]api.StepResult, 0, len(p.plan.Steps))}
	firstErr, stopped := "", false
	for i, ps := range p.plan.Steps {
		if !stopped && ctx.Err() != nil && firstErr == "" {
			firstErr = fmt.Sprintf("cancelled before step %d (%s)", i+1, ps.Label())
		}
		if stopped || ctx.Err() != nil {
			res.Steps = append(res.Steps, api.StepResult{Step: i, Tool: ps.Label(), Status: api.StepSkipped})
			continue
		}
		st := planStep(i, ps)
		r, attempts := runStep(ctx, steps, st)
		why := r.Failure()
		res.Steps = append(res.Steps, api.StepResult{Step: i, Tool: st.label(), Status: r.Status(), Attempts: attempts,
			ResponseID: r.ResponseID, Results: r.Results, Error: why})
		if why != "" {
			if firstErr == "" {
				firstErr = fmt.Sprintf("step %d (%s) failed: %s", i+1, st.label(), why)
			}
			stopped = p.plan.StopsOnFailure(i)
		}
	}
	if firstErr != "" {
		return outcome[api.PlanResult]{state: api.StateFailed, Result: res, err: firstErr}
	}
	return outcome[api.PlanResult]{state: api.StateCompleted, Result: res}
}

// planStep is step i of a plan, its actions read once: "namespace.tool"
// split into the namespace and the tool's name.
func planStep(i int, ps plan.Step) step {
	path := fmt.Sprintf("steps[%d]", i)
	batch := ps.Batch()
	calls := make([]inventory.Call, len(batch))
	for j, a := range batch {
		ns, name := a.Ref()
		calls[j] = inventory.Call{Namespace: ns, Cmd: protocol.Command{ToolName: name, ToolType: a.ToolType, Parameters: a.Parameters},
			Path: path, ToolField: "tool"}
		if len(ps.Actions) > 0 {
			calls[j].Path = fmt.Sprintf("%s.actions[%d]", path, j)
		}
		if a.Tool == "" {
			calls[j].ToolField = "tool_name"
		}
	}
	return step{index: i, path: path, calls: calls, timeout: ps.TimeoutOrDefault(), retries: ps.Retries, retryWait: ps.RetryWait}
}

// planSteps are a plan's steps, as planRunner runs them.
func planSteps(p *plan.Plan) []step {
	steps := make([]step, len(p.Steps))
	for i, ps := range p.Steps {
		steps[i] = planStep(i, ps)
	}
	return steps
}

// commandStep is the one step of a single command: its actions taken
// literally, no retries.
func commandStep(actions []protocol.Command, timeout time.Duration) step {
	calls := make([]inventory.Call, len(actions))
	for i, a := range actions {
		calls[i] = inventory.Call{Cmd: a, Path: fmt.Sprintf("actions[%d]", i), ToolField: "tool_name"}
	}
	return step{path: "actions", calls: calls, timeout: timeout}
}

// commandRunner runs one command from POST /api/devices/{id}/commands: a
// single step, no retries, its actions taken literally. Its result is the
// command's response.
type commandRunner struct {
	sessionID, deviceID string
	actions             []protocol.Command
	timeout             time.Duration
	waitForDevice       bool
}

func (c commandRunner) run(ctx context.Context, steps stepper) outcome[api.CommandResponse] {
	st := commandStep(c.actions, c.timeout)
	st.waitForDevice = c.waitForDevice
	r, _ := runStep(ctx, steps, st)
	if len(r.Results) == 0 {
		// It never ran (cancelled first, or its actions did not resolve);
		// still, every action ends in a Result with its call_id.
		r.Results = protocol.FailAll(protocol.CallIDs(c.actions), r.Failure())
	}
	return CommandOutcome(c.sessionID, c.deviceID, r)
}
