package httpapi

import (
	"errors"
	"net/http"

	"github.com/edgeaip/edgeaip/internal/version"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/cluster"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/metrics"
)

// nodeHandlers serve what is asked of this node itself: its health, its
// cluster, its metrics.
type nodeHandlers struct {
	gate    *gate
	inScope *inscope.Checker
	metrics *metrics.Metrics
	cluster *cluster.Cluster
	// degraded is Config's Health.
	degraded func() string
}

// health is GET /api/health. It is open, for load balancers; with an
// operator token (or login) it also lists the online clients in the
// caller's scope, as UFO's lists them all. A wrong token counts as a
// failed authentication, and a source refused for too many gets no list.
// While the database cannot take writes, or the server holds writes it
// has not taken yet, the server is degraded: 503, with the cause.
func (h *nodeHandlers) health(w http.ResponseWriter, r *http.Request) {
	out, code := api.Health{Status: "healthy"}, http.StatusOK
	if cause := h.degraded(); cause != "" {
		out, code = api.Health{Status: "degraded", Cause: cause}, http.StatusServiceUnavailable
	}
	if src := h.gate.authLimit.Source(r); h.gate.authLimit.Blocked(src) == 0 {
		c, err := h.gate.authenticate(r)
		switch {
		case errors.Is(err, identity.ErrWrongToken):
			h.gate.authFailed(src, metrics.SurfaceAPI, identity.RequestToken(r, false))
		case err == nil:
			out.OnlineClients, _ = h.inScope.Clients(r.Context(), c)
		}
	}
	writeJSON(w, code, out)
}

// serverVersion is GET /api/version: the server's build and wire, to
// any identity. Not on the open GET /api/health: the exact build tells
// whoever can reach the server which published flaws it has.
func serverVersion(w http.ResponseWriter, _ *http.Request) {
	v := version.Get()
	writeJSON(w, http.StatusOK, api.Version{Version: v.Version, Commit: v.Commit, Modified: v.Modified, Go: v.Go, OS: v.OS, Arch: v.Arch,
		Wire: protocol.Subprotocol})
}

// serveMetrics is GET /metrics.
func (h *nodeHandlers) serveMetrics(w http.ResponseWriter, r *http.Request) {
	h.metrics.Handler().ServeHTTP(w, r)
}
