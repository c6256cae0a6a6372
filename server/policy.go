package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/metrics"
)

// rule is what the access policy asks of the caller of one endpoint, or
// of a constellation sending one message type: the least role, and how
// its scope applies. See RATIONALE.md, "Identities".
type rule struct {
	// public endpoints are served to anyone, with no credentials.
	public bool
	role   access.Role
	scope  scopeRule
}

// scopeRule is how a caller's scope applies to an endpoint or message.
type scopeRule int

const (
	// noObject: there is nothing to hold to a scope (the caller's own
	// identity, a heartbeat).
	noObject scopeRule = iota
	// pathDevice: the path's {id} is a device; one outside the scope is
	// 404, as one not enrolled is.
	pathDevice
	// pathTask: the path's {id} is a task; one outside the scope is 404,
	// as one that does not exist is.
	pathTask
	// inHandler: the handler lists only what is in scope, and takes a
	// device or tool outside it as one that does not exist (lists, and
	// requests whose bodies name devices and tools).
	inHandler
	// linkTarget: a constellation's message about its target device,
	// which was in scope when it registered (else it was refused as a
	// target that is not connected).
	linkTarget
	// wholeFleet: the endpoint covers every device (metrics, identities):
	// a scoped identity may not use it (403).
	wholeFleet
)

// policy is the access policy, in one table: every endpoint, by its
// route's method and pattern, and every message type a constellation
// sends, as "WS type". Anything without an entry is refused (default
// deny): a test checks every endpoint of openapi.json and every message
// type against it. A device's own messages (command_results,
// device_info_response, token_rotated) have none: a device link is its
// device's token or certificate, and speaks only for that device.
var policy = map[string]rule{
	"GET /api/health":                                 {public: true},
	"GET /api/openapi.json":                           {public: true},
	"POST /api/login":                                 {public: true},
	"POST /api/logout":                                {public: true},
	"GET /api/whoami":                                 {role: access.Viewer, scope: noObject},
	"GET /api/clients":                                {role: access.Viewer, scope: inHandler},
	"GET /api/devices":                                {role: access.Viewer, scope: inHandler},
	"GET /api/devices/{id}":                           {role: access.Viewer, scope: pathDevice},
	"GET /api/devices/{id}/tools":                     {role: access.Viewer, scope: pathDevice},
	"GET /api/tasks":                                  {role: access.Viewer, scope: inHandler},
	"GET /api/tasks/{id}":                             {role: access.Viewer, scope: pathTask},
	"GET /api/tasks/{id}/events":                      {role: access.Viewer, scope: pathTask},
	"GET /api/task_result/{task_name}":                {role: access.Viewer, scope: inHandler},
	"GET /api/audit":                                  {role: access.Viewer, scope: inHandler},
	"GET /metrics":                                    {role: access.Viewer, scope: wholeFleet},
	"GET /api/cluster":                                {role: access.Operator, scope: wholeFleet},
	"POST /api/devices/{id}/commands":                 {role: access.Operator, scope: pathDevice},
	"POST /api/dispatch":                              {role: access.Operator, scope: inHandler},
	"POST /api/fleets":                                {role: access.Operator, scope: inHandler},
	"POST /api/admission":                             {role: access.Operator, scope: inHandler},
	"POST /api/tasks/{id}/cancel":                     {role: access.Operator, scope: pathTask},
	"DELETE /api/tasks/{id}":                          {role: access.Operator, scope: pathTask},
	"POST /api/devices/{id}/tools":                    {role: access.Deployer, scope: pathDevice},
	"POST /api/devices":                               {role: access.Admin, scope: inHandler},
	"DELETE /api/devices/{id}":                        {role: access.Admin, scope: pathDevice},
	"POST /api/devices/{id}/token":                    {role: access.Admin, scope: pathDevice},
	"POST /api/devices/{id}/certificate":              {role: access.Admin, scope: pathDevice},
	"GET /api/identities":                             {role: access.Admin, scope: wholeFleet},
	"POST /api/identities":                            {role: access.Admin, scope: wholeFleet},
	"DELETE /api/identities/{name}":                   {role: access.Admin, scope: wholeFleet},
	"POST /api/identities/{name}/tokens":              {role: access.Admin, scope: wholeFleet},
	"DELETE /api/identities/{name}/tokens/{token_id}": {role: access.Admin, scope: wholeFleet},
	// Go's profiles, with --pprof: not documented API, and for admins,
	// as they show everything the server runs.
	pprofKey: {role: access.Admin, scope: wholeFleet},

	// The MCP gateway: the endpoint, for any identity; its tools, each by
	// the role it needs, scoped in the tool (what is out of scope does not
	// exist), and held to admission as the API's commands are.
	"POST /mcp":                 {role: access.Viewer, scope: inHandler},
	"GET /mcp":                  {role: access.Viewer, scope: inHandler},
	"DELETE /mcp":               {role: access.Viewer, scope: inHandler},
	"MCP " + mcpListDevices:     {role: access.Viewer, scope: inHandler},
	"MCP " + mcpListDeviceTools: {role: access.Viewer, scope: inHandler},
	"MCP " + mcpGetTask:         {role: access.Viewer, scope: inHandler},
	"MCP " + mcpCallDeviceTool:  {role: access.Operator, scope: inHandler},
	"MCP " + mcpDeviceTool:      {role: access.Operator, scope: inHandler},
	"MCP " + mcpDispatchPlan:    {role: access.Operator, scope: inHandler},
	"MCP " + mcpCancelTask:      {role: access.Operator, scope: inHandler},

	"WS " + string(protocol.ClientRegister):          {role: access.Viewer, scope: linkTarget},
	"WS " + string(protocol.ClientHeartbeat):         {role: access.Viewer, scope: noObject},
	"WS " + string(protocol.ClientDeviceInfoRequest): {role: access.Viewer, scope: linkTarget},
	"WS " + string(protocol.ClientTaskEnd):           {role: access.Viewer, scope: noObject},
	"WS " + string(protocol.ClientError):             {role: access.Viewer, scope: noObject},
	"WS " + string(protocol.ClientTask):              {role: access.Operator, scope: linkTarget},
}

// messageKey is the policy's key of a message type.
func messageKey(t protocol.ClientMessageType) string { return "WS " + string(t) }

// forbidden is a caller's request that the policy refuses: 403.
type forbidden struct{ reason string }

func (e *forbidden) Error() string { return e.reason }

// allows checks a caller against the rule of key: its role, and whether
// a scoped identity may use it at all. Objects in scope are the
// handler's, or the guard's, to check.
func (ru rule) allows(c *caller, key string) error {
	switch {
	case !c.role.Covers(ru.role):
		return &forbidden{fmt.Sprintf("identity %q has role %s: %s needs %s", c.name, c.role, key, ru.role)}
	case ru.scope == wholeFleet && c.scoped():
		return &forbidden{fmt.Sprintf("identity %q is scoped (%s): %s covers the whole fleet", c.name, c.scope, key)}
	}
	return nil
}

// allow checks c against the policy's rule for key, default deny: a key
// with no rule is refused to everyone. Surfaces other than routes call it
// with keys of their own ("WS task"; the MCP gateway's, once it has
// rules); a refusal is a *forbidden, 403 on HTTP. It checks the role, and
// that a scoped caller may use the key at all: what the request is about
// is held to the scope with deviceInScope, taskInScope and the others in
// scope.go, and a tool call by admission (commandOrder, planOrder).
func allow(c *caller, key string) error {
	ru, ok := policy[key]
	if !ok {
		return &forbidden{fmt.Sprintf("%s has no access policy: refused", key)}
	}
	return ru.allows(c, key)
}

// allowMessage checks that c may send a message of type t.
func allowMessage(c *caller, t protocol.ClientMessageType) error {
	key := messageKey(t)
	if _, ok := policy[key]; !ok {
		return &forbidden{fmt.Sprintf("message type %q is not accepted from a constellation", t)}
	}
	return allow(c, key)
}

// guard serves h as the policy says for the route key: public, or for an
// authenticated caller whose role and scope allow it, which h then finds
// with callerFrom. A route without a rule is refused to all.
func (s *Server) guard(key string, h http.HandlerFunc) http.Handler {
	ru, ok := policy[key]
	if !ok {
		s.log.Error("route has no access policy: refused to everyone", "route", key)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusForbidden, fmt.Sprintf("%s has no access policy: refused", key))
		})
	}
	if ru.public {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := s.admit(w, r)
		if !ok {
			return
		}
		if err := ru.allows(c, key); err != nil {
			s.forbid(w, r, err)
			return
		}
		r = withCaller(r, c)
		if !s.pathInScope(w, r, ru.scope) {
			return
		}
		h(w, r)
	})
}

// admit authenticates r, answering it if it cannot go on: 429 from a
// source that failed too often, 401 without live credentials, 403 for a
// cookie from another origin, 503 if the store fails.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (*caller, bool) {
	src := s.source(r)
	if wait := s.authLimit.blocked(src); wait > 0 {
		s.tooManyFailures(w, metrics.SurfaceAPI, wait)
		return nil, false
	}
	c, err := s.authenticate(r)
	switch {
	case errors.Is(err, errWrongToken):
		s.authFailed(src, metrics.SurfaceAPI, requestToken(r, false))
		writeError(w, http.StatusUnauthorized, err.Error())
	case errors.Is(err, errNoCredentials), errors.Is(err, errNoLogin):
		writeError(w, http.StatusUnauthorized, err.Error())
	case errors.Is(err, errForbiddenOrigin):
		s.forbid(w, r, err)
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
	default:
		return c, true
	}
	return nil, false
}

// tooManyFailures answers 429 to a source refused for wait more.
func (s *Server) tooManyFailures(w http.ResponseWriter, surface string, wait int) {
	s.metrics.AuthThrottled(surface)
	w.Header().Set("Retry-After", strconv.Itoa(wait))
	writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many failed authentications from this address: try again in %d s", wait))
}

// pathInScope holds a scoped caller to its scope for the object the
// path names, answering 404 for one outside it, as for one that does not
// exist.
func (s *Server) pathInScope(w http.ResponseWriter, r *http.Request, sr scopeRule) bool {
	c := callerFrom(r)
	if !c.scoped() {
		return true
	}
	id := r.PathValue("id")
	var in bool
	var err error
	var missing string
	switch sr {
	case pathDevice:
		in, err = s.deviceInScope(r.Context(), c, id)
		missing = deviceNotEnrolled(id)
	case pathTask:
		in, err = s.taskInScope(r.Context(), c, id)
		missing = noTask(id)
	default:
		return true
	}
	switch {
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case !in:
		writeError(w, http.StatusNotFound, missing)
	}
	return err == nil && in
}
