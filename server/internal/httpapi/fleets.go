package httpapi

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net/http"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/internal/tasks/planread"
	"github.com/edgeaip/edgeaip/server/plan"
)

// createFleet is POST /api/fleets: it starts a plan on every enrolled
// device whose labels match, and that is in the caller's scope, as one
// fleet task, and answers at once. key, if not nil, is recorded with the
// task, with the answer.
func (h *taskHandlers) createFleet(w http.ResponseWriter, r *http.Request, key *store.IdempotencyKey) {
	who := identity.CallerFrom(r)
	var req api.FleetRequest
	if !readJSON(w, r, &req) {
		return
	}
	if err := checkFleetRequest(req, h.tasks.MaxSessions()); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	p, err := planread.Field(req.Plan, h.limits.MaxPlanBytes)
	if err != nil {
		writeRequestError(w, err)
		return
	}
	selector, devices, err := h.tasks.FleetTargets(r.Context(), who, req.Labels)
	if err != nil {
		writeError(w, targetsStatus(err), err.Error())
		return
	}
	f := tasks.FleetTask{
		Asker: tasks.Asker{Who: who, Kind: api.RequesterOperator}, Plan: p, Labels: req.Labels, Selector: selector, Devices: devices,
		Concurrency: cmp.Or(req.Concurrency, api.DefaultFleetConcurrency), AbortPercent: req.AbortPercent,
		ID: store.NewRowID(), TaskName: tasks.TaskNameOf(req.TaskName, p),
	}
	resp := api.FleetResponse{SessionID: f.ID, TaskName: f.TaskName, Devices: devices}
	f.Key = withAnswer(key, resp)
	sess, err := h.tasks.StartFleet(r.Context(), f)
	if err != nil {
		h.keys.writeTaskError(w, r, key, err)
		return
	}
	h.log.Info("fleet dispatched", "session_id", sess.ID, "task_name", sess.TaskName, "labels", tasks.LabelText(req.Labels),
		"devices", len(devices), "concurrency", f.Concurrency, "abort_percent", req.AbortPercent)
	writeJSON(w, http.StatusOK, resp)
}

// targetsStatus is the status of a failure to find a fleet's devices:
// 404 for labels that match none, 503 for the store.
func targetsStatus(err error) int {
	var none *tasks.NoDevicesError
	if errors.As(err, &none) {
		return http.StatusNotFound
	}
	return http.StatusServiceUnavailable
}

func checkFleetRequest(req api.FleetRequest, maxSessions int) error {
	switch {
	case len(req.Labels) == 0:
		return fmt.Errorf(`field "labels": at least one label is required`)
	case req.TaskName != "" && !plan.ValidTaskName(req.TaskName):
		return fmt.Errorf("%s", invalidTaskName)
	case req.Concurrency < 0 || req.Concurrency > maxSessions:
		return fmt.Errorf(`field "concurrency": %d: want 1 to %d (0: %d)`, req.Concurrency, maxSessions, api.DefaultFleetConcurrency)
	case req.AbortPercent < 0 || req.AbortPercent > 100:
		return fmt.Errorf(`field "abort_percent": %d: want 0 (never) to 100`, req.AbortPercent)
	case len(bytes.TrimSpace(req.Plan)) == 0 || string(bytes.TrimSpace(req.Plan)) == "null":
		return fmt.Errorf(`field "plan": missing`)
	}
	return nil
}
