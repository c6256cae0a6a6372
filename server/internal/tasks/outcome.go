package tasks

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// How commands and tasks end. A command ends in a dispatch.Result, whatever
// happens to it; a task (a session) ends in an outcome typed by its kind:
// an api.PlanResult, an api.CommandResponse or an api.FleetResult.
// CommandOutcome is the one place a command's response is built and the
// one place a single command's task is judged completed or failed.

// errNotRun: a step's session was cancelled before its first attempt.
var errNotRun = errors.New("cancelled before it ran")

// outcome is how a runner ended: its final state (completed, failed, or
// a stopped command's cancelled; any other fails the session as "session
// ended in unknown state"), its
// result R, and the error that ended it.
type outcome[R any] struct {
	state  api.TaskState
	Result R
	err    string
	// recorded: the store already holds this outcome. A single command's
	// session ends in the transaction that records its command's outcome.
	recorded bool
}

// endRow is row as it ends with o.
func (o outcome[R]) endRow(row store.Session) (store.Session, error) {
	result, err := json.Marshal(o.Result)
	if err != nil {
		return row, fmt.Errorf("session %q: result: %w", row.ID, err)
	}
	row.State, row.Result, row.Error = string(o.state), result, o.err
	return row, nil
}

// CommandOutcome is how the session of a single command ends: with the
// command's response, completed if every action succeeded, else failed
// with why, or cancelled if its task was (the command stopped with it),
// as a cancelled plan is; the results say what the device made of it.
func CommandOutcome(sessionID, deviceID string, r dispatch.Result) outcome[api.CommandResponse] {
	out := outcome[api.CommandResponse]{
		state:    api.StateCompleted,
		Result:   api.NewCommandResponse(r.ResponseID, sessionID, deviceID, r.Results),
		recorded: r.Recorded,
	}
	switch why := r.Failure(); {
	case why != "" && r.Stopped:
		out.state, out.err = api.StateCancelled, cancelMessage(reasonUserRequested, deviceID)
	case why != "":
		out.state, out.err = api.StateFailed, why
	}
	return out
}

// CommandSessionEnd is row, the session that the command rec alone makes
// up, as it ends with rec's recorded outcome, stopped if its task was
// cancelled: what the dispatcher records in the transaction that records
// that outcome.
func CommandSessionEnd(row store.Session, rec store.Command, stopped bool) (store.Session, error) {
	out := CommandOutcome(rec.SessionID, rec.DeviceID,
		dispatch.Result{ResponseID: rec.ResponseID, Results: rec.Results, Recorded: true, Stopped: stopped})
	return out.endRow(row)
}
