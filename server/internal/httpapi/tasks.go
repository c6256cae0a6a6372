package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/plan"
)

// taskHandlers serve the tasks: starting them (UFO's dispatch, fleets),
// checking an order without running it (the dry run), listing, reading,
// cancelling and removing them, and following their events; and UFO's
// list of online clients.
type taskHandlers struct {
	log      *slog.Logger
	store    *store.Store
	auth     *identity.Authority
	tasks    *tasks.FrontDoor
	inScope  *inscope.Checker
	registry *dispatch.Registry
	keys     *idempotency
	// limits and keepalive are Config's Limits and EventsKeepalive.
	limits    tasks.Limits
	keepalive time.Duration
}

// listTasks is GET /api/tasks?state=&task_name=&limit=&cursor=: a page
// of task summaries, newest first, with the cursor of the next page.
func (h *taskHandlers) listTasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := api.TaskState(q.Get("state"))
	if state != "" && !state.Valid() {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("query \"state\": %q: want created, running, completed, failed or cancelled", state))
		return
	}
	name := q.Get("task_name")
	if name != "" && !plan.ValidTaskName(name) {
		writeError(w, http.StatusBadRequest, "query \"task_name\": "+invalidTaskName)
		return
	}
	limit, ok := parseLimit(w, q.Get("limit"), api.DefaultTaskPage, api.MaxTaskPage)
	if !ok {
		return
	}
	after, err := store.ReadCursor(q.Get("cursor"))
	if err != nil {
		writeError(w, http.StatusBadRequest, `query "cursor": `+err.Error()+` (the "next" of a page)`)
		return
	}
	rows, err := h.summaries(r.Context(), identity.CallerFrom(r), store.SessionFilter{State: string(state), TaskName: name, After: after}, limit+1)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	page := api.TaskPage{Tasks: make([]api.TaskSummary, 0, min(len(rows), limit))}
	for i, row := range rows {
		if i == limit {
			page.Next = store.CursorAfter(rows[i-1])
			break
		}
		page.Tasks = append(page.Tasks, inscope.TaskSummary(row))
	}
	writeJSON(w, http.StatusOK, page)
}

// summaries lists, newest first, up to n of the tasks f picks that c may
// see. The store keeps the tasks on devices in c's scope, and the fleets,
// which are checked here; a page short of the fleets it dropped is filled
// from the rows after it.
func (h *taskHandlers) summaries(ctx context.Context, c *identity.Caller, f store.SessionFilter, n int) ([]store.Session, error) {
	only, err := h.inScope.Devices(ctx, c)
	if err != nil {
		return nil, err
	}
	f.OnlyDevices = only
	out := []store.Session{}
	for {
		f.Limit = n - len(out)
		rows, err := h.tasks.Tasks(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			in := true
			if row.DeviceID == "" {
				if in, err = h.inScope.Row(ctx, c, row); err != nil {
					return nil, err
				}
			}
			if in {
				out = append(out, row)
			}
		}
		if len(rows) < f.Limit || len(out) == n {
			return out, nil
		}
		last := rows[len(rows)-1]
		f.After = &store.SessionKey{CreatedAt: last.CreatedAt, ID: last.ID}
	}
}

// getTask is GET /api/tasks/{id}: the task with its commands.
func (h *taskHandlers) getTask(w http.ResponseWriter, r *http.Request) {
	t, sight, ok := h.lookupTask(w, r, r.PathValue("id"))
	if !ok {
		return
	}
	if p, ok := h.tasks.Progress(t.SessionID); ok && !t.State.Ended() {
		t.Result, _ = json.Marshal(p)
	}
	cmds, err := h.tasks.Commands(r.Context(), t.SessionID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	for _, c := range cmds {
		t.Commands = append(t.Commands, api.CommandRecord{
			ResponseID: c.ResponseID, Step: c.Step, Attempt: c.Attempt, Status: c.Status, Late: c.Late,
			Error: c.Error, Results: c.Results, CreatedAt: c.CreatedAt, FinishedAt: timePtr(c.FinishedAt),
		})
	}
	writeJSON(w, http.StatusOK, sight.Task(t))
}

// cancelTask is POST /api/tasks/{id}/cancel: it cancels a running task
// (reason user_requested; its requester gets a TASK_END) and the command
// it runs on its device, on whichever node of a cluster runs it, and
// answers with the task as it ended.
func (h *taskHandlers) cancelTask(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := h.tasks.CancelAnywhere(r.Context(), id, "cancelled by "+identity.CallerFrom(r).Name)
	switch {
	case errors.Is(err, tasks.ErrNotRunning), errors.Is(err, store.ErrNotFound):
		if t, _, ok := h.lookupTask(w, r, id); ok {
			writeError(w, http.StatusConflict, fmt.Sprintf("task %q is not running: it is %s", id, t.State))
		}
		return
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if t, sight, ok := h.lookupTask(w, r, id); ok {
		writeJSON(w, http.StatusOK, sight.Task(t))
	}
}

// removeTask is DELETE /api/tasks/{id}: UFO's remove_session, for a task
// that has ended. Its audit entries stay.
func (h *taskHandlers) removeTask(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if h.tasks.Running(id) {
		writeError(w, http.StatusConflict, fmt.Sprintf("task %q is running: cancel it first", id))
		return
	}
	err := h.tasks.Remove(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, fmt.Sprintf("no task %q", id))
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// lookupTask is get_result: the task as the store has it, and what the
// caller may see of it.
func (h *taskHandlers) lookupTask(w http.ResponseWriter, r *http.Request, id string) (api.Task, *inscope.Sight, bool) {
	row, err := h.tasks.Task(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no task %q", id))
		return api.Task{}, nil, false
	}
	var sight *inscope.Sight
	if err == nil {
		sight, err = h.inScope.Sight(r.Context(), identity.CallerFrom(r), row)
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return api.Task{}, nil, false
	}
	return inscope.TaskView(row), sight, true
}

// timePtr is t, or nil if it is zero: for the API's optional times.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
