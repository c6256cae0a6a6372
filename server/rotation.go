package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/cluster"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// A device token is rotated in three steps (RATIONALE.md, "Rotating a
// device's token"):
//
//  1. The operator asks (POST /api/devices/{id}/token): the store records
//     a rotation, pending, whether or not the device is linked.
//  2. The node holding the device's link offers it a new token, in a
//     ROTATE_TOKEN on the CBOR wire: at once if it is linked, else right
//     after it next registers. The hash of the token sent works from then
//     on, beside the old token.
//  3. The device keeps the token and says so (TOKEN_ROTATED), or connects
//     with it: either confirms the rotation, and the old token is retired,
//     working only until the grace the operator gave ends.
//
// Steps 2 and 3 are the device gateway's (wsgateway).

// rotateToken is POST /api/devices/{id}/token.
func (s *Server) rotateToken(w http.ResponseWriter, r *http.Request) {
	d, ok := s.lookupDevice(w, r)
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
	if s.deviceWire(d) == protocol.JSON.String() {
		writeError(w, http.StatusConflict, fmt.Sprintf("device %q links over JSON, UFO's wire, which cannot carry a new token: "+
			"enroll it again to give it one (aipctl device revoke %[1]s; aipctl device enroll %[1]s)", d.ID))
		return
	}
	audit := identity.CallerFrom(r).Audit(api.ActionDeviceRotateToken, d.ID, map[string]any{"grace": grace.String()})
	err := s.store.Write(r.Context(), func(tx *store.Tx) error {
		if err := tx.RequestRotation(d.ID, grace); err != nil {
			return err
		}
		return tx.AppendAudit(audit)
	})
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	settled := s.auth.WaitRotation(d.ID)
	linked := s.ws.OfferRotationTo(r.Context(), d.ID)
	if !linked && s.disp.Leases().HeldElsewhere(d.ID) {
		linked = true
		s.tellCluster(d.ID, cluster.DeviceRotate)
	}
	s.log.Info("device token rotation requested", "device", d.ID, "grace", grace, "linked", linked)
	if linked {
		select {
		case <-settled:
		case <-time.After(wait):
		case <-r.Context().Done():
			return
		}
	}
	s.answerRotation(w, r, d.ID, grace)
}

// answerRotation answers a rotation request with the rotation's state:
// 200 once the device has confirmed it, 202 while it is pending.
func (s *Server) answerRotation(w http.ResponseWriter, r *http.Request, id string, grace time.Duration) {
	d, ok := s.lookupDevice(w, r)
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
func (s *Server) deviceWire(d store.Device) string {
	if c := s.reg.Device(d.ID); c != nil {
		return c.Conn.Encoding().String()
	}
	return d.Wire
}
