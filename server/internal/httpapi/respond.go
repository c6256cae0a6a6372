package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
)

// maxRequestBytes caps an API request body.
const maxRequestBytes = 1 << 20

// forbid answers 403 with err, and logs it to log: a refused request
// may be an attack.
func forbid(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	log.Warn("request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
	writeError(w, http.StatusForbidden, err.Error())
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, api.Error{Error: msg})
}

// WriteError answers code with the API's error, {"error": msg}: for
// what the root answers on HTTP itself, as the API would (a device link
// refused while the node drains).
func WriteError(w http.ResponseWriter, code int, msg string) { writeError(w, code, msg) }

// writeRequestError answers 400 for a request that cannot go ahead: with
// each problem, if admission refused it; 403 if the access policy did.
func writeRequestError(w http.ResponseWriter, err error) {
	var refused *tasks.Refusal
	var denied *identity.Forbidden
	var away *tasks.Unreachable
	if errors.As(err, &denied) {
		writeError(w, http.StatusForbidden, err.Error())
		return
	}
	if errors.As(err, &away) {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if errors.As(err, &refused) {
		writeJSON(w, http.StatusBadRequest, api.Error{Error: refused.Error(), Problems: refused.Problems})
		return
	}
	writeError(w, http.StatusBadRequest, err.Error())
}

// writeSessionError answers a failure to create or run a session: 409 for
// a session_id another requester owns or that has already ended, or an
// idempotency key another request recorded first; 503 for anything else:
// the session limit (with the count), storage, or a server shutting down.
func writeSessionError(w http.ResponseWriter, err error) {
	var full *tasks.CapacityError
	var owned *tasks.SessionOwnedError
	var ended *tasks.SessionEndedError
	switch {
	case errors.As(err, &full):
		writeJSON(w, http.StatusServiceUnavailable, api.Error{Error: err.Error(), Sessions: full.Running})
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
