// Package httpapi is the server's HTTP surface: the operator API under
// /api (UFO's endpoints among it), /metrics, the dashboard, Go's profiles,
// and the mounting of the endpoints other parts serve, the WebSocket (/ws)
// and the MCP gateway (/mcp). Its route table (routes.go) is the one list
// of them all: each route's method and pattern, its handler, the access
// policy's key the guard holds its callers to, and whether openapi.json
// describes it. The handlers read a request, ask the parts below (the
// front door, the store, the scope checker, the identity authority) and
// answer; what a change means beyond the API (a device enrolled or
// revoked, an identity revoked, a token to offer on a device's link) they
// tell the root through Config's hooks.
package httpapi

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/edgeaip/edgeaip/internal/authlimit"
	"github.com/edgeaip/edgeaip/server/internal/cluster"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/internal/rollouts"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/metrics"
)

// Config is what the API serves from: the server's parts, which the root
// builds and shares with the other surfaces, what tunes the API, the hooks
// into what the root does beyond it, and the endpoints other parts serve.
// The parts a route uses, its hooks and the endpoints are required.
type Config struct {
	Store *store.Store
	// Auth finds who callers are, signs devices' certificates and
	// settles token rotations.
	Auth *identity.Authority
	// AuthLimit refuses sources that failed to authenticate too often;
	// the WebSocket endpoint counts into it too.
	AuthLimit *authlimit.Limiter
	Metrics   *metrics.Metrics
	// Tasks is the front door every request that runs or follows a task
	// goes through.
	Tasks *tasks.FrontDoor
	// Rollouts keep the fleet at its desired state: rollouts, their
	// modules, and the labels that decide where they reach.
	Rollouts *rollouts.Engine
	// InScope says what a caller's scope lets it see; Devices is the
	// cache of enrolled devices that commands are sent to.
	InScope *inscope.Checker
	Devices *inscope.Enrolled
	// Registry is where each device and constellation is linked.
	Registry *dispatch.Registry
	// Cluster is the node's cluster, for GET /api/cluster; nil on a
	// single node.
	Cluster *cluster.Cluster
	Logger  *slog.Logger

	// Limits bound a request's plan (MaxPlanBytes) as admission does.
	Limits tasks.Limits
	// SecureCookies, EventsKeepalive and Pprof are the server's
	// (server.Config): the login cookie always Secure, an idle event
	// stream's comment, Go's profiles served.
	SecureCookies   bool
	EventsKeepalive time.Duration
	Pprof           bool
	// Stop is closed when the server shuts down: a rotation's grace
	// that ends later revokes nothing here.
	Stop <-chan struct{}

	// Health is why the server is degraded (the store, the cluster, a
	// drain), or "": GET /api/health answers 503 with it.
	Health func() string
	// Relabelled is told of device id whose labels changed here, once the
	// store holds them: the caches, the MCP views, the rollouts and the
	// other nodes hear of it.
	Relabelled func(id string)
	// Enrolled is told of device id enrolled here, once the store holds
	// it: the caches, the MCP views and the other nodes hear of it.
	Enrolled func(id string)
	// DeviceRevoked is told of device id revoked here, once the store
	// holds it: its link closes, its commands fail and its sessions end,
	// on every node.
	DeviceRevoked func(id string)
	// Revoke makes a revocation of an identity, or of some of its tokens,
	// act here and on every node; the store already refuses them.
	Revoke func(identity.Revocation)
	// OfferRotation offers device id the new token of a rotation the
	// store holds, where its link is (here, or on the node that holds it
	// in a cluster), and reports whether it is linked anywhere: if not, it
	// gets it when it next registers.
	OfferRotation func(ctx context.Context, id string) bool

	// WebSocket serves GET /ws, devices' and constellations' links; it
	// authenticates them itself.
	WebSocket http.Handler
	// MCP serves /mcp, the MCP gateway, to the caller the guard found
	// (identity.CallerFrom).
	MCP http.Handler
}

// API serves the routes of its table. Each group of routes is served by
// a handler type of its own, which holds only the parts it uses: the
// devices, the tasks, the identities and the login, and the node itself;
// the guard (gate) and the idempotency keys are shared by them all.
type API struct {
	gate       *gate
	keys       *idempotency
	devices    *deviceHandlers
	tasks      *taskHandlers
	identities *identityHandlers
	rollouts   *rolloutHandlers
	releases   *releaseHandlers
	node       *nodeHandlers
	// pprof, webSocket and mcp are Config's Pprof, WebSocket and MCP.
	pprof          bool
	webSocket, mcp http.Handler
}

// New is the API of cfg. EventsKeepalive defaults to 15 s, Logger to
// slog.Default().
func New(cfg Config) *API {
	log := cmp.Or(cfg.Logger, slog.Default())
	g := &gate{log: log, auth: cfg.Auth, authLimit: cfg.AuthLimit, metrics: cfg.Metrics, inScope: cfg.InScope,
		csrf: http.NewCrossOriginProtection()}
	keys := &idempotency{log: log, store: cfg.Store, tasks: cfg.Tasks, inScope: cfg.InScope, locks: newKeyLocks(log)}
	devices := &deviceHandlers{log: log, store: cfg.Store, auth: cfg.Auth, inScope: cfg.InScope, devices: cfg.Devices,
		registry: cfg.Registry, tasks: cfg.Tasks, keys: keys, rollouts: cfg.Rollouts,
		onEnrolled: cfg.Enrolled, onRevoked: cfg.DeviceRevoked, offerRotation: cfg.OfferRotation}
	return &API{
		gate:    g,
		keys:    keys,
		devices: devices,
		rollouts: &rolloutHandlers{log: log, store: cfg.Store, rollouts: cfg.Rollouts, devices: devices,
			relabelled: cfg.Relabelled},
		releases: &releaseHandlers{log: log, store: cfg.Store},
		tasks: &taskHandlers{log: log, store: cfg.Store, auth: cfg.Auth, tasks: cfg.Tasks,
			inScope: cfg.InScope, registry: cfg.Registry, keys: keys,
			limits: cfg.Limits, keepalive: cmp.Or(cfg.EventsKeepalive, 15*time.Second)},
		identities: &identityHandlers{log: log, store: cfg.Store, auth: cfg.Auth, gate: g,
			revoke: cfg.Revoke, stop: cfg.Stop, secureCookies: cfg.SecureCookies},
		node:  &nodeHandlers{gate: g, inScope: cfg.InScope, metrics: cfg.Metrics, cluster: cfg.Cluster, degraded: cfg.Health},
		pprof: cfg.Pprof, webSocket: cfg.WebSocket, mcp: cfg.MCP,
	}
}

// Handler serves every route of the table, each behind the guard of its
// policy key; Go's profiles only with Config.Pprof.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range a.Routes() {
		if rt.Profile && !a.pprof {
			continue
		}
		mux.Handle(rt.Method+" "+rt.Pattern, a.gate.guard(rt.Policy, rt.Handler))
	}
	return mux
}
