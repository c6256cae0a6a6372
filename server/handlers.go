package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// maxRequestBytes caps an API request body.
const maxRequestBytes = 1 << 20

// validID is what device ids may look like: safe in paths, logs and URLs.
var validID = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$`)

// route is one endpoint of the operator API. The OpenAPI document lists
// exactly these, which a test checks.
type route struct {
	method, pattern string
	public          bool // served without the operator token
	handler         http.HandlerFunc
}

func (s *Server) routes() []route {
	return []route{
		// UFO's endpoints.
		{"GET", "/api/health", true, s.health},
		{"GET", "/api/clients", false, s.clients},
		{"POST", "/api/dispatch", false, s.idempotent(s.dispatch)},
		{"GET", "/api/task_result/{task_name}", false, s.taskResult},
		// edgeaip's.
		{"GET", "/api/openapi.json", true, s.openAPI},
		{"GET", "/api/devices", false, s.listDevices},
		{"POST", "/api/devices", false, s.enroll},
		{"GET", "/api/devices/{id}", false, s.getDevice},
		{"DELETE", "/api/devices/{id}", false, s.revoke},
		{"GET", "/api/devices/{id}/tools", false, s.deviceTools},
		{"POST", "/api/devices/{id}/token", false, s.rotateToken},
		{"POST", "/api/devices/{id}/certificate", false, s.signCertificate},
		{"POST", "/api/devices/{id}/commands", false, s.idempotent(s.command)},
		{"POST", "/api/devices/{id}/tools", false, s.deployTool},
		{"GET", "/api/tasks", false, s.listTasks},
		{"GET", "/api/tasks/{id}", false, s.getTask},
		{"DELETE", "/api/tasks/{id}", false, s.removeTask},
		{"POST", "/api/tasks/{id}/cancel", false, s.cancelTask},
		{"GET", "/api/tasks/{id}/events", false, s.serveEvents},
		{"GET", "/api/audit", false, s.audit},
		{"POST", "/api/fleets", false, s.idempotent(s.createFleet)},
		{"POST", "/api/login", true, s.login},
		{"POST", "/api/logout", true, s.logout},
		{"GET", "/metrics", false, s.metrics.Handler().ServeHTTP},
	}
}

// operator admits requests that act for the operator: with the operator
// token, or the dashboard's login cookie from the dashboard's own page.
func (s *Server) operator(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, err := s.operatorAuth(r)
		switch {
		case !ok:
			writeError(w, http.StatusUnauthorized, "missing or wrong operator token")
		case err != nil:
			s.forbid(w, r, err)
		default:
			h(w, r)
		}
	})
}

// forbid answers 403 with err, and logs it: a refused request may be an
// attack.
func (s *Server) forbid(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Warn("request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
	writeError(w, http.StatusForbidden, err.Error())
}

func (s *Server) isOperator(r *http.Request) bool {
	ok, err := s.operatorAuth(r)
	return ok && err == nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, api.Error{Error: msg})
}

// writeRequestError answers 400 for a request that cannot go ahead: with
// each problem, if admission refused it.
func writeRequestError(w http.ResponseWriter, err error) {
	var refused *refusal
	if errors.As(err, &refused) {
		writeJSON(w, http.StatusBadRequest, api.Error{Error: refused.Error(), Problems: refused.problems})
		return
	}
	writeError(w, http.StatusBadRequest, err.Error())
}

// writeSessionError answers a failure to create or run a session: 409 for
// a session_id another requester owns or that has already ended, or an
// idempotency key another request recorded first; 503 for anything else:
// the session limit (with the count), storage, or a server shutting down.
func writeSessionError(w http.ResponseWriter, err error) {
	var full *capacityError
	var owned *sessionOwnedError
	var ended *sessionEndedError
	switch {
	case errors.As(err, &full):
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: err.Error(), Sessions: full.running})
	case errors.As(err, &owned), errors.As(err, &ended), errors.Is(err, store.ErrKeyTaken):
		writeError(w, http.StatusConflict, err.Error())
	default:
		writeError(w, http.StatusServiceUnavailable, err.Error())
	}
}

// readJSON decodes a request body strictly: unknown fields are errors, so a
// typo does not silently do something else.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeBody(w, r, v, true)
}

// readUFOJSON decodes the body of one of UFO's endpoints as UFO's server
// does: it takes the fields it knows and ignores the rest, so that a UFO
// client that sends more is served as UFO would serve it.
func readUFOJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeBody(w, r, v, false)
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any, strict bool) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "request body: "+err.Error())
		return false
	}
	return true
}

// health is GET /api/health. It is open, for load balancers; with the
// operator token it also lists the online clients, as UFO's does. While
// the database cannot take writes, or the server holds writes it has not
// taken yet, the server is degraded: 503, with the cause.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h, code := api.Health{Status: "healthy"}, http.StatusOK
	if cause := s.unrecorded.health(); cause != "" {
		h, code = api.Health{Status: "degraded", Cause: cause}, http.StatusServiceUnavailable
	}
	if s.isOperator(r) {
		h.OnlineClients = s.reg.ids()
	}
	writeJSON(w, code, h)
}

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDocument)
}
