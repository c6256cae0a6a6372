package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/plan"
)

// StoredEventsPoll is how often a stream of a task that runs on another
// node reads the store again for its events.
const StoredEventsPoll = 250 * time.Millisecond

// storedEvents are the events of session row, with its commands cmds, as
// the store has them: for a plan or a single command, each command's step
// start, and end once it has ended, then the task's end once it has
// ended. They are the events the node that runs the task emits, in the
// same order, so that a stream numbers them alike on any node, and
// Last-Event-ID means the same after the task moves to another node. A
// fleet's stream has its end alone: its devices' events are theirs.
// ended reports whether the task has ended.
func storedEvents(row store.Session, cmds []store.Command) (events []api.TaskEvent, ended bool, err error) {
	ended = api.TaskState(row.State).Ended()
	if row.Kind != api.KindFleet {
		labels, err := stepLabels(row, cmds)
		if err != nil {
			return nil, false, err
		}
		for _, c := range cmds {
			events = append(events, commandEvents(row, c, len(labels), labels[c.Step])...)
		}
	}
	if ended {
		events = append(events, api.TaskEvent{Type: api.EventEnd, SessionID: row.ID, DeviceID: row.DeviceID, State: api.TaskState(row.State),
			Status: string(taskEndStatus(api.TaskState(row.State))), Result: row.Result, Error: row.Error, Time: row.FinishedAt})
	}
	return events, ended, nil
}

// stepLabels names the steps of session row, whose commands are cmds, as
// its events do.
func stepLabels(row store.Session, cmds []store.Command) ([]string, error) {
	if row.Kind == api.KindCommand {
		if len(cmds) == 0 {
			return nil, nil
		}
		return []string{commandStep(cmds[0].Actions, 0).label()}, nil
	}
	p, err := plan.Parse(row.Plan)
	if err != nil {
		return nil, fmt.Errorf("task %q: its plan: %w", row.ID, err)
	}
	steps := planSteps(p)
	labels := make([]string, len(steps))
	for i, st := range steps {
		labels[i] = st.label()
	}
	for _, c := range cmds {
		if c.Step < 0 || c.Step >= len(labels) {
			return nil, fmt.Errorf("task %q: command %s is for step %d of %d", row.ID, c.ResponseID, c.Step, len(labels))
		}
	}
	return labels, nil
}

// commandEvents are the events of command c, step c.Step of steps: its
// start, and its end once it has ended.
func commandEvents(row store.Session, c store.Command, steps int, label string) []api.TaskEvent {
	step := c.Step
	start := api.TaskEvent{Type: api.EventStepStart, SessionID: row.ID, DeviceID: row.DeviceID, Steps: steps, Step: &step,
		Attempt: c.Attempt, Tool: label, ResponseID: c.ResponseID, Time: c.CreatedAt}
	if c.Status == store.CommandPending {
		return []api.TaskEvent{start}
	}
	r := dispatch.Result{ResponseID: c.ResponseID, Results: c.Results}
	end := start
	end.Type, end.Status, end.Results, end.Error, end.Time = api.EventStepEnd, r.Status(), r.Results, r.Failure(), c.FinishedAt
	return []api.TaskEvent{start, end}
}

// StoredEvents reads task id's events from the store: see
// storedEvents.
func (m *SessionManager) StoredEvents(ctx context.Context, id string) ([]api.TaskEvent, bool, error) {
	row, err := m.store.Sessions().Get(ctx, id)
	if err != nil {
		return nil, false, err
	}
	cmds, err := m.store.Commands().OfSession(ctx, id)
	if err != nil {
		return nil, false, err
	}
	return storedEvents(row, cmds)
}
