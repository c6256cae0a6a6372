package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// audit is GET /api/audit?device=&session=&identity=&since=&after=&limit=:
// the audit log, oldest first. A caller whose scope picks devices reads
// the entries about those devices alone; one with tool patterns, without
// the parameters and errors of tools outside them.
func (h *deviceHandlers) audit(w http.ResponseWriter, r *http.Request) {
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
	only, err := h.inScope.Devices(r.Context(), identity.CallerFrom(r))
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	f.OnlyDevices = only
	entries, err := h.store.Audit().List(r.Context(), f)
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
	writeJSON(w, http.StatusOK, h.inScope.Audit(identity.CallerFrom(r), out))
}

// Page sizes of GET /api/audit.
const (
	defaultAuditLimit = 100
	maxAuditLimit     = 1000
)
