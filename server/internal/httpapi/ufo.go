package httpapi

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/internal/tasks/planread"
	"github.com/edgeaip/edgeaip/server/plan"
)

// The endpoints of UFO's server, with UFO's checks in UFO's order.

const invalidTaskName = "Invalid task_name: must be a non-empty string of characters [A-Za-z0-9._-] and must not start with '.'"

// clients is GET /api/clients: the online clients in the caller's scope.
func (h *taskHandlers) clients(w http.ResponseWriter, r *http.Request) {
	ids, err := h.inScope.Clients(r.Context(), identity.CallerFrom(r))
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, api.Clients{OnlineClients: ids})
}

// dispatch is POST /api/dispatch: it starts a plan on an online device in
// the background and answers at once. key, if not nil, is recorded with
// the task, with the answer.
func (h *taskHandlers) dispatch(w http.ResponseWriter, r *http.Request, key *store.IdempotencyKey) {
	who := identity.CallerFrom(r)
	var req api.DispatchRequest
	if !readUFOJSON(w, r, &req) {
		return
	}
	hasPlan := len(bytes.TrimSpace(req.Plan)) > 0 && string(bytes.TrimSpace(req.Plan)) != "null"
	switch {
	case req.Request == "" && !hasPlan:
		writeError(w, http.StatusBadRequest, "Empty task content")
		return
	case req.ClientID == "":
		writeError(w, http.StatusBadRequest, "Empty client ID")
		return
	case req.TaskName != "" && !plan.ValidTaskName(req.TaskName):
		writeError(w, http.StatusBadRequest, invalidTaskName)
		return
	case !h.inScope.Online(r.Context(), who, req.ClientID):
		writeError(w, http.StatusNotFound, "Client not online")
		return
	case req.Request != "" && hasPlan:
		writeError(w, http.StatusBadRequest, `give either "request" or "plan", not both`)
		return
	}
	p, err := dispatchedPlan(req, h.limits.MaxPlanBytes)
	if err != nil {
		writeRequestError(w, err)
		return
	}
	t := tasks.PlanTask{
		Asker: tasks.Asker{Who: who, Kind: api.RequesterOperator}, Device: req.ClientID, Plan: p,
		ID: store.NewRowID(), TaskName: tasks.TaskNameOf(req.TaskName, p),
	}
	resp := api.DispatchResponse{Status: "dispatched", TaskName: t.TaskName, ClientID: req.ClientID, SessionID: t.ID}
	t.Key = withAnswer(key, resp)
	sess, err := h.tasks.StartPlan(r.Context(), t)
	if err != nil {
		h.keys.writeTaskError(w, r, key, err)
		return
	}
	h.log.Info("task dispatched", "session_id", sess.ID, "task_name", sess.TaskName, "device", sess.DeviceID, "steps", len(p.Steps))
	writeJSON(w, http.StatusOK, resp)
}

// dispatchedPlan reads the plan of a dispatch: the request's text, or the
// plan field as an object or as text.
func dispatchedPlan(req api.DispatchRequest, maxExpanded int) (*plan.Plan, error) {
	if req.Request != "" {
		p, err := planread.FromRequest(req.Request, maxExpanded)
		if err != nil {
			return nil, planread.InField("request", err)
		}
		return p, nil
	}
	return planread.Field(req.Plan, maxExpanded)
}

// taskResult is GET /api/task_result/{task_name}: "pending" until the
// newest task of that name ends, then "done" with its result. A task
// outside the caller's scope answers as one not known: pending, as UFO
// answers.
func (h *taskHandlers) taskResult(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("task_name")
	if !plan.ValidTaskName(name) {
		writeError(w, http.StatusBadRequest, invalidTaskName)
		return
	}
	row, err := h.tasks.TaskNamed(r.Context(), name)
	if err == nil {
		var in bool
		if in, err = h.inScope.Row(r.Context(), identity.CallerFrom(r), row); err == nil && !in {
			err = store.ErrNotFound
		}
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeJSON(w, http.StatusOK, api.TaskResult{Status: "pending"})
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case !api.TaskState(row.State).Ended():
		writeJSON(w, http.StatusOK, api.TaskResult{Status: "pending", SessionID: row.ID, State: api.TaskState(row.State)})
	default:
		h.writeTaskResult(w, r, row)
	}
}

// writeTaskResult answers "done" with row, a task that has ended, as the
// caller may see it.
func (h *taskHandlers) writeTaskResult(w http.ResponseWriter, r *http.Request, row store.Session) {
	sight, err := h.inScope.Sight(r.Context(), identity.CallerFrom(r), row)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	t := sight.Task(inscope.TaskView(row))
	writeJSON(w, http.StatusOK, api.TaskResult{Status: "done", SessionID: row.ID, Result: t.Result, State: t.State, Error: t.Error})
}
