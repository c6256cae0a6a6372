package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// rotateToken is POST /api/devices/{id}/token, the first of a rotation's
// three steps (internal/identity/RATIONALE.md, "Rotating a device's
// token"): the store records the rotation, pending; the link that holds
// the device offers it the new token (Config.OfferRotation), and the
// answer waits, within the request's wait, for the device to confirm it.
func (h *deviceHandlers) rotateToken(w http.ResponseWriter, r *http.Request) {
	d, ok := h.lookupDevice(w, r)
	if !ok {
		return
	}
	var req api.RotateRequest
	if !readJSON(w, r, &req) {
		return
	}
	grace, graceErr := api.ParseGrace(req.Grace)
	wait, waitErr := api.ParseRotateWait(req.Wait)
	if err := errors.Join(graceErr, waitErr); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if h.deviceWire(d) == protocol.JSON.String() {
		writeError(w, http.StatusConflict, fmt.Sprintf("device %q links over JSON, UFO's wire, which cannot carry a new token: "+
			"enroll it again to give it one (aipctl device revoke %[1]s; aipctl device enroll %[1]s)", d.ID))
		return
	}
	audit := identity.CallerFrom(r).Audit(api.ActionDeviceRotateToken, d.ID, map[string]any{"grace": grace.String()})
	err := h.store.Write(r.Context(), func(tx *store.Tx) error {
		if err := tx.Devices().RequestRotation(d.ID, grace); err != nil {
			return err
		}
		return tx.Audit().Append(audit)
	})
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	settled := h.auth.WaitRotation(d.ID)
	linked := h.offerRotation(r.Context(), d.ID)
	h.log.Info("device token rotation requested", "device", d.ID, "grace", grace, "linked", linked)
	if linked {
		select {
		case <-settled:
		case <-time.After(wait):
		case <-r.Context().Done():
			return
		}
	}
	h.answerRotation(w, r, d.ID, grace)
}

// answerRotation answers a rotation request with the rotation's state:
// 200 once the device has confirmed it, 202 while it is pending.
func (h *deviceHandlers) answerRotation(w http.ResponseWriter, r *http.Request, id string, grace time.Duration) {
	d, ok := h.lookupDevice(w, r)
	if !ok {
		return
	}
	if d.Rotation != nil {
		writeJSON(w, http.StatusAccepted, inscope.RotationView(id, d.Rotation))
		return
	}
	writeJSON(w, http.StatusOK, api.TokenRotation{ID: id, State: api.RotationConfirmed, Grace: grace.String()})
}

// deviceWire is the wire of device d's link, or of its last one if it is
// not linked, "" if it never was.
func (h *deviceHandlers) deviceWire(d store.Device) string {
	if c := h.registry.Device(d.ID); c != nil {
		return c.Conn.Encoding().String()
	}
	return d.Wire
}
