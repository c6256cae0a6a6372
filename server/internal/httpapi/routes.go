package httpapi

import (
	"net/http"
	"net/http/pprof"

	"github.com/edgeaip/edgeaip/server/dashboard"
)

// Route is one endpoint the server serves. The table of them (Routes) is
// the one place that pairs a method and pattern with its handler and its
// access policy's key; openapi.json describes the documented ones, and
// the tests hold the two, and the policy, to each other.
type Route struct {
	// Method and Pattern are what the route serves, as http.ServeMux
	// takes them: "GET", "/api/devices/{id}".
	Method, Pattern string
	// Policy is the access policy's key of the route (identity.RuleFor),
	// which the guard holds every caller to: its method and pattern, but
	// for Go's profiles, which share one.
	Policy string
	// Undocumented says why openapi.json does not describe the route;
	// "" for the API's own routes, which it describes.
	Undocumented string
	// Profile marks Go's profiles, served only with Config.Pprof.
	Profile bool
	Handler http.Handler
}

// route is a documented route whose policy key is its method and
// pattern.
func route(method, pattern string, h http.HandlerFunc) Route {
	return mount(method, pattern, h)
}

// mount is route, for a handler another part serves.
func mount(method, pattern string, h http.Handler) Route {
	return Route{Method: method, Pattern: pattern, Policy: method + " " + pattern, Handler: h}
}

// Why routes are not in openapi.json.
const (
	undocumentedWebSocket = "the WebSocket of devices and constellations speaks AIP, not this API"
	undocumentedDashboard = "the dashboard's page and files, which read the API"
	undocumentedProfiles  = "Go's profiles (net/http/pprof), with --pprof"
)

// pprofKey is the access policy's key of Go's profiles, all of them.
const pprofKey = "GET /debug/pprof/"

// Routes is the route table: every route the server serves.
func (a *API) Routes() []Route {
	dash := dashboard.Handler()
	profile := func(method, pattern string, h http.HandlerFunc) Route {
		return Route{Method: method, Pattern: pattern, Policy: pprofKey, Undocumented: undocumentedProfiles, Profile: true, Handler: h}
	}
	return []Route{
		// UFO's endpoints.
		route("GET", "/api/health", a.node.health),
		route("GET", "/api/clients", a.tasks.clients),
		route("POST", "/api/dispatch", a.keys.idempotent(a.tasks.dispatch)),
		route("GET", "/api/task_result/{task_name}", a.tasks.taskResult),
		// edgeaip's.
		route("GET", "/api/openapi.json", serveOpenAPI),
		route("GET", "/api/devices", a.devices.listDevices),
		route("POST", "/api/devices", a.devices.enroll),
		route("GET", "/api/devices/{id}", a.devices.getDevice),
		route("DELETE", "/api/devices/{id}", a.devices.revoke),
		route("GET", "/api/devices/{id}/tools", a.devices.deviceTools),
		route("POST", "/api/devices/{id}/token", a.devices.rotateToken),
		route("POST", "/api/devices/{id}/certificate", a.devices.signCertificate),
		route("POST", "/api/devices/{id}/commands", a.keys.idempotent(a.devices.command)),
		route("POST", "/api/devices/{id}/tools", a.devices.deployTool),
		route("GET", "/api/tasks", a.tasks.listTasks),
		route("GET", "/api/tasks/{id}", a.tasks.getTask),
		route("DELETE", "/api/tasks/{id}", a.tasks.removeTask),
		route("POST", "/api/tasks/{id}/cancel", a.tasks.cancelTask),
		route("GET", "/api/tasks/{id}/events", a.tasks.serveEvents),
		route("PATCH", "/api/devices/{id}/labels", a.rollouts.label),
		route("GET", "/api/audit", a.devices.audit),
		route("PUT", "/api/modules/{sha256}", a.rollouts.putModule),
		route("GET", "/api/releases", a.releases.list),
		route("PUT", "/api/releases/{sha256}", a.releases.publish),
		route("GET", "/api/rollouts", a.rollouts.list),
		route("POST", "/api/rollouts", a.rollouts.apply),
		route("GET", "/api/rollouts/{name}", a.rollouts.status),
		route("GET", "/api/rollouts/{name}/history", a.rollouts.history),
		route("POST", "/api/rollouts/{name}/pause", a.rollouts.pause),
		route("POST", "/api/rollouts/{name}/resume", a.rollouts.resume),
		route("POST", "/api/rollouts/{name}/rollback", a.rollouts.rollback),
		route("POST", "/api/fleets", a.keys.idempotent(a.tasks.createFleet)),
		route("POST", "/api/admission", a.tasks.checkAdmission),
		route("GET", "/api/identities", a.identities.listIdentities),
		route("POST", "/api/identities", a.identities.addIdentity),
		route("DELETE", "/api/identities/{name}", a.identities.revokeIdentity),
		route("POST", "/api/identities/{name}/tokens", a.identities.rotateIdentity),
		route("DELETE", "/api/identities/{name}/tokens/{token_id}", a.identities.revokeToken),
		route("GET", "/api/whoami", a.identities.whoami),
		route("GET", "/api/version", serverVersion),
		route("GET", "/api/cluster", a.node.clusterView),
		route("POST", "/api/login", a.identities.login),
		route("POST", "/api/logout", a.identities.logout),
		route("GET", "/metrics", a.node.serveMetrics),
		// The MCP gateway: Streamable HTTP, one endpoint.
		mount("POST", "/mcp", a.mcp),
		mount("GET", "/mcp", a.mcp),
		mount("DELETE", "/mcp", a.mcp),

		// Devices' and constellations' links: open to all at the guard,
		// the endpoint authenticates them itself (a device's token or
		// certificate, a constellation's operator token) and holds each
		// message of a constellation to its rule ("WS task").
		{Method: "GET", Pattern: "/ws", Policy: "GET /ws", Undocumented: undocumentedWebSocket, Handler: a.webSocket},
		// The dashboard: the page and its files, open to all.
		{Method: "GET", Pattern: "/{$}", Policy: "GET /{$}", Undocumented: undocumentedDashboard, Handler: dash},
		{Method: "GET", Pattern: "/static/", Policy: "GET /static/", Undocumented: undocumentedDashboard, Handler: dash},
		// Go's profiles, to admins.
		profile("GET", "/debug/pprof/", pprof.Index),
		profile("GET", "/debug/pprof/cmdline", pprof.Cmdline),
		profile("GET", "/debug/pprof/profile", pprof.Profile),
		profile("GET", "/debug/pprof/symbol", pprof.Symbol),
		profile("POST", "/debug/pprof/symbol", pprof.Symbol),
		profile("GET", "/debug/pprof/trace", pprof.Trace),
	}
}
