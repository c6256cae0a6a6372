package server

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/plan"
)

// createFleet is POST /api/fleets: it starts a plan on every enrolled
// device whose labels match, and that is in the caller's scope, as one
// fleet task, and answers at once. key, if not nil, is recorded with the
// task, with the answer.
func (s *Server) createFleet(w http.ResponseWriter, r *http.Request, key *store.IdempotencyKey) {
	who := identity.CallerFrom(r)
	var req api.FleetRequest
	if !readJSON(w, r, &req) {
		return
	}
	if err := checkFleetRequest(req, s.sessions.cfg.MaxSessions); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	p, err := planField(req.Plan, s.cfg.Limits.MaxPlanBytes)
	if err != nil {
		writeRequestError(w, err)
		return
	}
	selector := access.LabelSelector(req.Labels).And(who.Scope.Devices)
	devices, err := s.store.DevicesMatching(r.Context(), selector, 0)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if len(devices) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no enrolled device has the labels %s", labelText(req.Labels)))
		return
	}
	if err := s.admission.admit(planOrder(who, p, devices...)); err != nil {
		writeRequestError(w, err)
		return
	}
	spec := sessionSpec{
		ID: newRowID(), TaskName: taskNameOf(req.TaskName, p), Requester: who.Requester(api.RequesterOperator, ""),
		Scope: who.Scope, Plan: p, Fleet: &fleetSpec{labels: req.Labels, selector: selector, devices: devices,
			concurrency: req.Concurrency, abortPercent: req.AbortPercent},
	}
	if spec.Fleet.concurrency == 0 {
		spec.Fleet.concurrency = api.DefaultFleetConcurrency
	}
	resp := api.FleetResponse{SessionID: spec.ID, TaskName: spec.TaskName, Devices: devices}
	spec.Key = withAnswer(key, resp)
	sess, _, err := s.sessions.getOrCreateSession(r.Context(), spec)
	if err != nil {
		s.writeStartError(w, r, key, err)
		return
	}
	s.sessions.executeTaskAsync(sess, nil)
	s.log.Info("fleet dispatched", "session_id", sess.ID, "task_name", sess.TaskName, "labels", labelText(req.Labels),
		"devices", len(devices), "concurrency", spec.Fleet.concurrency, "abort_percent", req.AbortPercent)
	writeJSON(w, http.StatusOK, resp)
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

// labelText writes labels as k=v,k=v, sorted.
func labelText(labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	kv := make([]string, len(keys))
	for i, k := range keys {
		kv[i] = k + "=" + labels[k]
	}
	return strings.Join(kv, ",")
}
