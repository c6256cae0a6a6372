package server

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/netip"

	"github.com/edgeaip/edgeaip/server/internal/cluster"
	"github.com/edgeaip/edgeaip/server/internal/httpapi"
)

// The HTTP surface is internal/httpapi's: its route table lists every
// route, /ws and /mcp among them, with the access policy's key of each.
// The root hands it the server's parts, the WebSocket and MCP endpoints,
// and the hooks below, for what a change made through the API means for
// the rest of the server.

// newHTTPAPI is the HTTP API of s, once its parts are built.
func (s *Server) newHTTPAPI() *httpapi.API {
	return httpapi.New(httpapi.Config{
		Store: s.store, Auth: s.auth, AuthLimit: s.authLimit, Metrics: s.metrics,
		Tasks: s.tasks, Rollouts: s.rollouts, InScope: s.inScope, Devices: s.devices, Registry: s.reg, Cluster: s.cluster,
		Logger: s.log, Limits: s.cfg.Limits, SecureCookies: s.cfg.SecureCookies, EventsKeepalive: s.cfg.EventsKeepalive,
		Pprof: s.cfg.Pprof, Stop: s.stop,
		Health: func() string {
			return cmp.Or(s.unrecorded.Health(), s.clusterHealth(), s.drainHealth())
		},
		Enrolled:      s.deviceEnrolled,
		Relabelled:    s.deviceRelabelled,
		DeviceRevoked: func(id string) { s.deviceRevoked(id); s.tellCluster(id, cluster.DeviceRevoked) },
		Revoke:        s.publishRevocation,
		OfferRotation: s.offerRotationAnywhere,
		WebSocket:     s.ws,
		MCP:           s.mcp,
	})
}

// Handler serves every route of the HTTP API's table: /ws, /api,
// /metrics, /mcp and the dashboard at /.
func (s *Server) Handler() http.Handler { return s.http.Handler() }

// deviceEnrolled tells the device cache, the MCP views and the other
// nodes of device id, enrolled here.
func (s *Server) deviceEnrolled(id string) {
	s.devices.Forget(id)
	s.tellCluster(id, cluster.DeviceChanged)
	s.mcp.DevicesChanged()
}

// deviceRevoked closes device id's link, fails its waiting commands and
// cancels its sessions, here; on every node in a cluster.
func (s *Server) deviceRevoked(id string) {
	s.devices.Forget(id)
	s.reg.Disconnect(id, "device revoked")
	s.mcp.DevicesChanged()
	s.sessions.DeviceGone(id)
	s.disp.FailDevice(id, fmt.Sprintf("device %q was revoked", id))
	s.disp.Leases().Release(id)
}

// offerRotationAnywhere offers device id the new token of its pending
// rotation where its link is: here, or, in cluster mode, on the node
// that holds it, which hears of it (cluster.DeviceRotate). It reports
// whether the device is linked anywhere.
func (s *Server) offerRotationAnywhere(ctx context.Context, id string) bool {
	if s.ws.OfferRotationTo(ctx, id) {
		return true
	}
	if !s.disp.Leases().HeldElsewhere(id) {
		return false
	}
	s.tellCluster(id, cluster.DeviceRotate)
	return true
}

// authFailed counts a failed authentication with token from src on
// surface, as the API counts its own: for the WebSocket endpoints.
func (s *Server) authFailed(src netip.Addr, surface, token string) {
	httpapi.AuthFailed(s.authLimit, s.metrics, src, surface, token)
}

// tooManyFailures answers 429 to a source refused for wait more seconds,
// as the API does: for the WebSocket endpoints.
func (s *Server) tooManyFailures(w http.ResponseWriter, surface string, wait int) {
	httpapi.TooManyFailures(w, s.metrics, surface, wait)
}
