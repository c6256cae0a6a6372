package httpapi

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/internal/rollouts"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
)

// validID is what device ids may look like: safe in paths, logs and URLs.
var validID = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$`)

// deviceHandlers serve the devices: enrolling and revoking them, their
// views, tools, certificates and token rotations, the commands and tool
// deploys sent to them, and the audit log of what was done to them.
type deviceHandlers struct {
	log      *slog.Logger
	store    *store.Store
	auth     *identity.Authority
	inScope  *inscope.Checker
	devices  *inscope.Enrolled
	registry *dispatch.Registry
	tasks    *tasks.FrontDoor
	keys     *idempotency
	// rollouts say which tools a rollout owns on a device: a deploy of
	// one is refused unless forced.
	rollouts *rollouts.Engine
	// onEnrolled, onRevoked and offerRotation are Config's Enrolled,
	// DeviceRevoked and OfferRotation.
	onEnrolled    func(id string)
	onRevoked     func(id string)
	offerRotation func(ctx context.Context, id string) bool
}

// enroll is POST /api/devices. A scoped admin enrolls only devices whose
// labels its scope picks.
func (h *deviceHandlers) enroll(w http.ResponseWriter, r *http.Request) {
	who := identity.CallerFrom(r)
	var req api.EnrollRequest
	if !readJSON(w, r, &req) {
		return
	}
	if !validID.MatchString(req.ID) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("device id %q: want 1-64 of [A-Za-z0-9._-], not starting with '.'", req.ID))
		return
	}
	if !who.Scope.Device(req.Labels) {
		forbid(h.log, w, r, fmt.Errorf(`field "labels": identity %q may enroll only devices its scope picks (%s)`, who.Name, who.Scope.Devices))
		return
	}
	if c := h.registry.Get(req.ID); c != nil {
		writeError(w, http.StatusConflict, fmt.Sprintf("%q is the id of a connected %s client", req.ID, c.Type))
		return
	}
	// As a relabel: labels that would have two rollouts put one tool on
	// the device are refused.
	if err := h.rollouts.CheckLabels(r.Context(), req.ID, req.Labels); err != nil {
		var conflict *rollouts.ConflictError
		if errors.As(err, &conflict) {
			writeError(w, http.StatusConflict, err.Error())
		} else {
			writeError(w, http.StatusServiceUnavailable, err.Error())
		}
		return
	}
	resp := api.EnrollResponse{ID: req.ID, Token: identity.NewToken(identity.DeviceTokenPrefix)}
	var cert *x509.Certificate
	if req.CSR != "" {
		var pem []byte
		var err error
		if cert, pem, err = h.auth.SignDeviceCertificate(req.ID, req.CSR); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		resp.Certificate = string(pem)
	}
	params := map[string]any{"labels": req.Labels}
	err := h.store.Write(r.Context(), func(tx *store.Tx) error {
		if err := tx.Devices().Create(req.ID, identity.HashToken(resp.Token), req.Labels); err != nil {
			return err
		}
		if cert != nil {
			rec := identity.SignedRecord(req.ID, cert)
			if err := tx.Devices().AddCertificate(rec); err != nil {
				return err
			}
			params["certificate_serial"] = rec.Serial
		}
		return tx.Audit().Append(who.Audit(api.ActionDeviceEnroll, req.ID, params))
	})
	if errors.Is(err, store.ErrExists) {
		writeError(w, http.StatusConflict, fmt.Sprintf("device %q is already enrolled", req.ID))
		return
	}
	if err != nil {
		h.log.Error("enroll failed", "device", req.ID, "err", err)
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	h.onEnrolled(req.ID)
	h.log.Info("device enrolled", "device", req.ID, "certificate", cert != nil, "by", who.Name)
	writeJSON(w, http.StatusCreated, resp)
}

// revoke deletes a device: its tokens stop working and its certificates
// are revoked, its connection closes at once, its waiting commands fail
// and its sessions are cancelled.
func (h *deviceHandlers) revoke(w http.ResponseWriter, r *http.Request) {
	id, who := r.PathValue("id"), identity.CallerFrom(r)
	err := h.store.Write(r.Context(), func(tx *store.Tx) error {
		if err := tx.Devices().Delete(id); err != nil {
			return err
		}
		return tx.Audit().Append(who.Audit(api.ActionDeviceRevoke, id, nil))
	})
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, inscope.DeviceNotEnrolled(id))
		return
	} else if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	h.onRevoked(id)
	h.log.Info("device revoked", "device", id, "by", who.Name)
	w.WriteHeader(http.StatusNoContent)
}

// listDevices is GET /api/devices: the devices in the caller's scope.
func (h *deviceHandlers) listDevices(w http.ResponseWriter, r *http.Request) {
	devs, err := h.store.Devices().All(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	who := identity.CallerFrom(r)
	out := make([]api.Device, 0, len(devs))
	for _, d := range devs {
		if who.Scope.Device(d.Labels) {
			out = append(out, h.inScope.DeviceView(d, who.Scope))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *deviceHandlers) getDevice(w http.ResponseWriter, r *http.Request) {
	if d, ok := h.lookupDevice(w, r); ok {
		writeJSON(w, http.StatusOK, h.inScope.DeviceView(d, identity.CallerFrom(r).Scope))
	}
}

// deviceTools is GET /api/devices/{id}/tools: the tools in the caller's
// scope.
func (h *deviceHandlers) deviceTools(w http.ResponseWriter, r *http.Request) {
	d, ok := h.lookupDevice(w, r)
	if !ok {
		return
	}
	tools := []protocol.MCPToolInfo{}
	if v := h.inScope.DeviceView(d, identity.CallerFrom(r).Scope); v.Info != nil && v.Info.Tools != nil {
		tools = v.Info.Tools
	}
	writeJSON(w, http.StatusOK, tools)
}

// lookupDevice is the device the request's path names, as the store has
// it, info and last_seen included: for the views of a device.
func (h *deviceHandlers) lookupDevice(w http.ResponseWriter, r *http.Request) (store.Device, bool) {
	id := r.PathValue("id")
	d, err := h.store.Devices().Get(r.Context(), id)
	return d, deviceFound(w, id, err)
}

// enrolled is the device the request's path names, from the device
// cache: for the requests that send it commands.
func (h *deviceHandlers) enrolled(w http.ResponseWriter, r *http.Request) (inscope.Device, bool) {
	id := r.PathValue("id")
	d, err := h.devices.Get(r.Context(), id)
	return d, deviceFound(w, id, err)
}

// deviceFound answers 404 or 503 for a failed lookup of device id, and
// reports whether it succeeded.
func deviceFound(w http.ResponseWriter, id string, err error) bool {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, inscope.DeviceNotEnrolled(id))
		return false
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return false
	}
	return true
}

// command is POST /api/devices/{id}/commands: one command, run as a
// session of its own, answered when it ends. key, if not nil, is recorded
// with the command.
func (h *deviceHandlers) command(w http.ResponseWriter, r *http.Request, key *store.IdempotencyKey) {
	d, ok := h.enrolled(w, r)
	if !ok {
		return
	}
	var req api.CommandRequest
	if !readJSON(w, r, &req) {
		return
	}
	resp, err := h.tasks.RunCommand(r.Context(), tasks.CommandTask{
		Asker: tasks.Asker{Who: identity.CallerFrom(r), Kind: api.RequesterOperator}, Device: d.ID, Actions: req.Actions,
		Timeout: req.Timeout, TimeoutArg: `field "timeout"`, Key: key, WaitForDevice: req.WaitForDevice,
	})
	if err != nil {
		h.keys.writeTaskError(w, r, key, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}
