package server

import (
	"context"
	"fmt"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/plan"
)

// runner carries out a session's task: it decides which steps go to the
// device and when the task is over. planRunner runs a fixed plan; an LLM
// planner would be another runner, choosing each next step from the
// results so far. Everything else (retries, timeouts, recording, events,
// cancellation) is the stepper's and the session manager's.
type runner interface {
	run(ctx context.Context, steps stepper) outcome
}

// stepper runs one step on the session's device: one command per attempt,
// with the step's timeout, retries and backoff.
type stepper interface {
	runStep(ctx context.Context, index int, step plan.Step) api.StepResult
}

// progressReporter is a runner that can tell how far it has got, for
// GET /api/tasks/{id} while the task runs.
type progressReporter interface {
	progress() any
}

// outcome is how a runner ended. State is completed or failed; anything
// else fails the session as "session ended in unknown state".
type outcome struct {
	state  api.TaskState
	result any
	err    string
}

// planRunner runs a plan's steps in order. A failed step ends the plan
// when early_exit says so; the steps after it are skipped. Its error
// counts steps from 1, as people do (and aipctl and the dashboard show
// them); the API's step fields count from 0.
type planRunner struct {
	plan *plan.Plan
}

func (p planRunner) run(ctx context.Context, steps stepper) outcome {
	res := api.PlanResult{Steps: make([]api.StepResult, 0, len(p.plan.Steps))}
	firstErr, stopped := "", false
	for i, step := range p.plan.Steps {
		if !stopped && ctx.Err() != nil && firstErr == "" {
			firstErr = fmt.Sprintf("cancelled before step %d (%s)", i+1, step.Label())
		}
		if stopped || ctx.Err() != nil {
			res.Steps = append(res.Steps, api.StepResult{Step: i, Tool: step.Label(), Status: api.StepSkipped})
			continue
		}
		r := steps.runStep(ctx, i, step)
		res.Steps = append(res.Steps, r)
		if r.Status != api.StepSuccess {
			if firstErr == "" {
				firstErr = fmt.Sprintf("step %d (%s) failed: %s", i+1, r.Tool, r.Error)
			}
			stopped = p.plan.StopsOnFailure(i)
		}
	}
	if firstErr != "" {
		return outcome{state: api.StateFailed, result: res, err: firstErr}
	}
	return outcome{state: api.StateCompleted, result: res}
}

// commandRunner runs one command from POST /api/devices/{id}/commands: a
// single step, no retries. Its result is the CommandResponse.
type commandRunner struct {
	sessionID, deviceID string
	actions             []protocol.Command
	step                plan.Step
}

func newCommandRunner(sessionID, deviceID string, actions []protocol.Command, timeout plan.Duration) commandRunner {
	batch := make([]plan.Action, len(actions))
	for i, a := range actions {
		batch[i] = plan.Action{ToolName: a.ToolName, ToolType: a.ToolType, Parameters: a.Parameters}
	}
	return commandRunner{sessionID: sessionID, deviceID: deviceID, actions: actions, step: plan.Step{Actions: batch, Timeout: timeout}}
}

func (c commandRunner) run(ctx context.Context, steps stepper) outcome {
	r := steps.runStep(ctx, 0, c.step)
	if len(r.Results) == 0 {
		r.Results = protocol.FailAll(protocol.CallIDs(c.actions), r.Error)
	}
	resp := api.NewCommandResponse(r.ResponseID, c.sessionID, c.deviceID, r.Results)
	if r.Status != api.StepSuccess {
		return outcome{state: api.StateFailed, result: resp, err: r.Error}
	}
	return outcome{state: api.StateCompleted, result: resp}
}
