package httpapi

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
)

// enroll is POST /api/devices. A scoped admin enrolls only devices whose
// labels its scope picks.
func (a *API) enroll(w http.ResponseWriter, r *http.Request) {
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
		forbid(a.log, w, r, fmt.Errorf(`field "labels": identity %q may enroll only devices its scope picks (%s)`, who.Name, who.Scope.Devices))
		return
	}
	if c := a.reg.Get(req.ID); c != nil {
		writeError(w, http.StatusConflict, fmt.Sprintf("%q is the id of a connected %s client", req.ID, c.Type))
		return
	}
	resp := api.EnrollResponse{ID: req.ID, Token: identity.NewToken(identity.DeviceTokenPrefix)}
	var cert *x509.Certificate
	if req.CSR != "" {
		var pem []byte
		var err error
		if cert, pem, err = a.auth.SignDeviceCertificate(req.ID, req.CSR); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		resp.Certificate = string(pem)
	}
	params := map[string]any{"labels": req.Labels}
	err := a.store.Write(r.Context(), func(tx *store.Tx) error {
		if err := tx.CreateDevice(req.ID, identity.HashToken(resp.Token), req.Labels); err != nil {
			return err
		}
		if cert != nil {
			rec := identity.SignedRecord(req.ID, cert)
			if err := tx.AddCertificate(rec); err != nil {
				return err
			}
			params["certificate_serial"] = rec.Serial
		}
		return tx.AppendAudit(who.Audit(api.ActionDeviceEnroll, req.ID, params))
	})
	if errors.Is(err, store.ErrExists) {
		writeError(w, http.StatusConflict, fmt.Sprintf("device %q is already enrolled", req.ID))
		return
	}
	if err != nil {
		a.log.Error("enroll failed", "device", req.ID, "err", err)
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	a.cfg.Enrolled(req.ID)
	a.log.Info("device enrolled", "device", req.ID, "certificate", cert != nil, "by", who.Name)
	writeJSON(w, http.StatusCreated, resp)
}

// revoke deletes a device: its tokens stop working and its certificates
// are revoked, its connection closes at once, its waiting commands fail
// and its sessions are cancelled.
func (a *API) revoke(w http.ResponseWriter, r *http.Request) {
	id, who := r.PathValue("id"), identity.CallerFrom(r)
	err := a.store.Write(r.Context(), func(tx *store.Tx) error {
		if err := tx.DeleteDevice(id); err != nil {
			return err
		}
		return tx.AppendAudit(who.Audit(api.ActionDeviceRevoke, id, nil))
	})
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, inscope.DeviceNotEnrolled(id))
		return
	} else if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	a.cfg.DeviceRevoked(id)
	a.log.Info("device revoked", "device", id, "by", who.Name)
	w.WriteHeader(http.StatusNoContent)
}

// listDevices is GET /api/devices: the devices in the caller's scope.
func (a *API) listDevices(w http.ResponseWriter, r *http.Request) {
	devs, err := a.store.Devices(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	who := identity.CallerFrom(r)
	out := make([]api.Device, 0, len(devs))
	for _, d := range devs {
		if who.Scope.Device(d.Labels) {
			out = append(out, a.inScope.DeviceView(d, who.Scope))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) getDevice(w http.ResponseWriter, r *http.Request) {
	if d, ok := a.lookupDevice(w, r); ok {
		writeJSON(w, http.StatusOK, a.inScope.DeviceView(d, identity.CallerFrom(r).Scope))
	}
}

// deviceTools is GET /api/devices/{id}/tools: the tools in the caller's
// scope.
func (a *API) deviceTools(w http.ResponseWriter, r *http.Request) {
	d, ok := a.lookupDevice(w, r)
	if !ok {
		return
	}
	tools := []protocol.MCPToolInfo{}
	if v := a.inScope.DeviceView(d, identity.CallerFrom(r).Scope); v.Info != nil && v.Info.Tools != nil {
		tools = v.Info.Tools
	}
	writeJSON(w, http.StatusOK, tools)
}

// lookupDevice is the device the request's path names, as the store has
// it, info and last_seen included: for the views of a device.
func (a *API) lookupDevice(w http.ResponseWriter, r *http.Request) (store.Device, bool) {
	id := r.PathValue("id")
	d, err := a.store.Device(r.Context(), id)
	return d, deviceFound(w, id, err)
}

// enrolled is the device the request's path names, from the device
// cache: for the requests that send it commands.
func (a *API) enrolled(w http.ResponseWriter, r *http.Request) (inscope.Device, bool) {
	id := r.PathValue("id")
	d, err := a.devices.Get(r.Context(), id)
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
func (a *API) command(w http.ResponseWriter, r *http.Request, key *store.IdempotencyKey) {
	d, ok := a.enrolled(w, r)
	if !ok {
		return
	}
	var req api.CommandRequest
	if !readJSON(w, r, &req) {
		return
	}
	resp, err := a.tasks.RunCommand(r.Context(), tasks.CommandTask{
		Asker: tasks.Asker{Who: identity.CallerFrom(r), Kind: api.RequesterOperator}, Device: d.ID, Actions: req.Actions,
		Timeout: req.Timeout, TimeoutArg: `field "timeout"`, Key: key, WaitForDevice: req.WaitForDevice,
	})
	if err != nil {
		a.keys.writeTaskError(w, r, key, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// audit is GET /api/audit?device=&session=&identity=&since=&after=&limit=:
// the audit log, oldest first. A caller whose scope picks devices reads
// the entries about those devices alone.
func (a *API) audit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.AuditFilter{DeviceID: q.Get("device"), SessionID: q.Get("session"), Identity: q.Get("identity")}
	if since := q.Get("since"); since != "" {
		t, err := time.Parse(time.RFC3339Nano, since)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf(`query "since": %q is not an RFC 3339 time`, since))
			return
		}
		f.Since = t
	}
	var after int64
	if text := q.Get("after"); text != "" {
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("query \"after\": %q is not a sequence number", text))
			return
		}
		after = n
	}
	limit, ok := parseLimit(w, q.Get("limit"), defaultAuditLimit, maxAuditLimit)
	if !ok {
		return
	}
	f.AfterSeq, f.Limit = after, limit
	only, err := a.inScope.Devices(r.Context(), identity.CallerFrom(r))
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	f.OnlyDevices = only
	entries, err := a.store.Audit(r.Context(), f)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	out := make([]api.AuditEntry, len(entries))
	for i, e := range entries {
		out[i] = api.AuditEntry{
			Seq: e.Seq, At: e.At, Actor: e.Actor, Identity: e.Identity, TokenID: e.TokenID, Action: e.Action, DeviceID: e.DeviceID, SessionID: e.SessionID, ResponseID: e.ResponseID,
			CallID: e.CallID, Tool: e.Tool, Namespace: e.Namespace, ModuleSHA256: e.ModuleSHA256, Parameters: e.Parameters,
			Outcome: e.Outcome, Error: e.Error, Late: e.Late,
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// Page sizes of GET /api/audit.
const (
	defaultAuditLimit = 100
	maxAuditLimit     = 1000
)

// parseLimit reads a list's "limit" query: def if empty, else 1 to max.
func parseLimit(w http.ResponseWriter, s string, def, max int) (int, bool) {
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("query \"limit\": %q: want 1 to %d", s, max))
		return 0, false
	}
	return n, true
}
