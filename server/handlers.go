package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// maxRequestBytes caps an API request body.
const maxRequestBytes = 1 << 20

// validID is what device ids may look like: safe in paths, logs and URLs.
var validID = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$`)

func (s *Server) routeAPI(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/health", s.health)
	mux.Handle("GET /api/devices", s.operator(s.listDevices))
	mux.Handle("POST /api/devices", s.operator(s.enroll))
	mux.Handle("GET /api/devices/{id}", s.operator(s.getDevice))
	mux.Handle("DELETE /api/devices/{id}", s.operator(s.revoke))
	mux.Handle("GET /api/devices/{id}/tools", s.operator(s.deviceTools))
	mux.Handle("POST /api/devices/{id}/commands", s.operator(s.command))
	mux.Handle("POST /api/devices/{id}/tools", s.operator(s.deployTool))
}

// operator admits requests that carry the operator token.
func (s *Server) operator(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := requestToken(r, false)
		if token == "" || !sameHash(hashToken(token), s.adminHash) {
			writeError(w, http.StatusUnauthorized, "missing or wrong operator token")
			return
		}
		h(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, api.Error{Error: msg})
}

// readJSON decodes a request body strictly: unknown fields are errors, so a
// typo does not silently do something else.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "request body: "+err.Error())
		return false
	}
	return true
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{Status: "healthy"})
}

func (s *Server) enroll(w http.ResponseWriter, r *http.Request) {
	var req api.EnrollRequest
	if !readJSON(w, r, &req) {
		return
	}
	if !validID.MatchString(req.ID) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("device id %q: want 1-64 of [A-Za-z0-9._-], not starting with '.'", req.ID))
		return
	}
	token := newToken(deviceTokenPrefix)
	err := s.store.CreateDevice(r.Context(), req.ID, hashToken(token), req.Labels)
	if errors.Is(err, store.ErrExists) {
		writeError(w, http.StatusConflict, fmt.Sprintf("device %q is already enrolled", req.ID))
		return
	}
	if err != nil {
		s.log.Error("enroll failed", "device", req.ID, "err", err)
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	s.log.Info("device enrolled", "device", req.ID)
	writeJSON(w, http.StatusCreated, api.EnrollResponse{ID: req.ID, Token: token})
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.store.DeleteDevice(r.Context(), id); errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("device %q is not enrolled", id))
		return
	} else if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	s.reg.disconnect(id, "device revoked")
	s.log.Info("device revoked", "device", id)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listDevices(w http.ResponseWriter, r *http.Request) {
	devs, err := s.store.Devices(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	out := make([]api.Device, 0, len(devs))
	for _, d := range devs {
		out = append(out, s.deviceView(d))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getDevice(w http.ResponseWriter, r *http.Request) {
	if d, ok := s.lookupDevice(w, r); ok {
		writeJSON(w, http.StatusOK, s.deviceView(d))
	}
}

func (s *Server) deviceTools(w http.ResponseWriter, r *http.Request) {
	d, ok := s.lookupDevice(w, r)
	if !ok {
		return
	}
	tools := []protocol.MCPToolInfo{}
	if v := s.deviceView(d); v.Info != nil && v.Info.Tools != nil {
		tools = v.Info.Tools
	}
	writeJSON(w, http.StatusOK, tools)
}

func (s *Server) lookupDevice(w http.ResponseWriter, r *http.Request) (store.Device, bool) {
	id := r.PathValue("id")
	d, err := s.store.Device(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("device %q is not enrolled", id))
		return d, false
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return d, false
	}
	return d, true
}

// deviceView is a device as the API shows it: online state and the system
// info of the live connection, or else of its last registration.
func (s *Server) deviceView(d store.Device) api.Device {
	v := api.Device{ID: d.ID, Labels: d.Labels, CreatedAt: d.CreatedAt}
	if !d.LastSeen.IsZero() {
		v.LastSeen = &d.LastSeen
	}
	if dc := s.reg.get(d.ID); dc != nil {
		v.Online, v.Info = true, dc.info.Load()
	} else if d.Info != nil {
		var info protocol.SystemInfo
		if json.Unmarshal(d.Info, &info) == nil {
			v.Info = &info
		}
	}
	return v
}

func (s *Server) command(w http.ResponseWriter, r *http.Request) {
	d, ok := s.lookupDevice(w, r)
	if !ok {
		return
	}
	var req api.CommandRequest
	if !readJSON(w, r, &req) {
		return
	}
	timeout, err := api.ParseTimeout(req.Timeout)
	if err != nil || timeout <= 0 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("field \"timeout\": %q is not a positive duration", req.Timeout))
		return
	}
	if err := validateActions(req.Actions); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	resp, err := s.disp.run(r.Context(), d.ID, req.SessionID, req.Actions, timeout)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// validateActions applies the wire's own rules, so the operator hears of a
// bad action now rather than as a rejected frame.
func validateActions(actions []protocol.Command) error {
	if len(actions) == 0 {
		return errors.New("field \"actions\": at least one action is required")
	}
	m := protocol.ServerMessage{Type: protocol.ServerCommand, Status: protocol.StatusContinue, Actions: actions}
	return m.Validate()
}
