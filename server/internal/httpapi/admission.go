package httpapi

import (
	"errors"
	"net/http"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/internal/tasks/planread"
)

// checkAdmission is POST /api/admission, the dry run of a dispatch, a
// fleet or a command: admission's verdict on a plan or a command for a
// device or for the devices some labels match, with every problem, and
// which devices were checked against a registration that may be stale.
// Nothing is recorded or sent. The verdict is the caller's: its role and
// scope hold the request as they would hold the one it stands for. A
// request that cannot be checked (no such device, none in the caller's
// scope, no device with the labels, a plan that does not parse) is an
// error, as it is for the request it stands for, and so is one the
// caller's role forbids (403); what admission refuses is a verdict, 200.
func (h *taskHandlers) checkAdmission(w http.ResponseWriter, r *http.Request) {
	var req api.AdmissionRequest
	if !readJSON(w, r, &req) {
		return
	}
	who := identity.CallerFrom(r)
	devices, code, err := h.admissionTargets(r, who, req)
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	o, err := h.admissionOrder(who, req, devices)
	if err == nil {
		err = h.tasks.DryRun(o)
	}
	verdict := api.AdmissionResponse{Admitted: err == nil, Devices: make([]api.AdmissionDevice, len(devices))}
	var refused *tasks.Refusal
	switch {
	case errors.As(err, &refused):
		verdict.Problems = refused.Problems
	case err != nil:
		writeRequestError(w, err)
		return
	}
	for i, id := range devices {
		verdict.Devices[i] = h.admissionDevice(r, id)
	}
	writeJSON(w, http.StatusOK, verdict)
}

// admissionTargets are the devices in who's scope a dry run is for, or
// an error and its status. A device outside the scope is not enrolled,
// as for the request the dry run stands for.
func (h *taskHandlers) admissionTargets(r *http.Request, who *identity.Caller, req api.AdmissionRequest) ([]string, int, error) {
	switch {
	case (req.Device == "") == (len(req.Labels) == 0):
		return nil, http.StatusBadRequest, errors.New(`give either "device" or "labels"`)
	case req.Device != "":
		_, err := h.store.Devices().Get(r.Context(), req.Device)
		in := err == nil
		if in {
			in, err = h.inScope.Device(r.Context(), who, req.Device)
		}
		switch {
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return nil, http.StatusServiceUnavailable, err
		case !in:
			return nil, http.StatusNotFound, errors.New(inscope.DeviceNotEnrolled(req.Device))
		}
		return []string{req.Device}, 0, nil
	}
	_, devices, err := h.tasks.FleetTargets(r.Context(), who, req.Labels)
	if err != nil {
		return nil, targetsStatus(err), err
	}
	return devices, 0, nil
}

// admissionOrder is what a dry run checks: the plan or the actions, for
// devices, asked by who.
func (h *taskHandlers) admissionOrder(who *identity.Caller, req api.AdmissionRequest, devices []string) (tasks.Order, error) {
	hasPlan := len(req.Plan) > 0 && string(req.Plan) != "null"
	switch {
	case hasPlan == (len(req.Actions) > 0):
		return tasks.Order{}, errors.New(`give either "plan" or "actions"`)
	case hasPlan:
		p, err := planread.Field(req.Plan, h.limits.MaxPlanBytes)
		if err != nil {
			return tasks.Order{}, err
		}
		return tasks.PlanOrder(who, p, devices...), nil
	}
	if err := tasks.ValidateActions(req.Actions); err != nil {
		return tasks.Order{}, err
	}
	o := tasks.CommandOrder(who, devices[0], req.Actions)
	o.Devices = devices
	return o, nil
}

// admissionDevice is how fresh what admission checked device id against
// is.
func (h *taskHandlers) admissionDevice(r *http.Request, id string) api.AdmissionDevice {
	d := api.AdmissionDevice{ID: id, Online: h.registry.Device(id) != nil}
	if dev, err := h.store.Devices().Get(r.Context(), id); err == nil && !dev.LastSeen.IsZero() {
		d.LastSeen = &dev.LastSeen
	}
	return d
}
