package identity

import (
	"fmt"
	"maps"
	"slices"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/access"
)

// Rule is what the access policy asks of the caller of one endpoint, or
// of a constellation sending one message type: the least role, and how
// its scope applies. See RATIONALE.md, "Identities".
type Rule struct {
	// Public endpoints are served to anyone: the guard asks for no
	// credentials (the WebSocket endpoint asks for its own).
	Public bool
	// Role is the least role a caller needs.
	Role access.Role
	// Scope is how a caller's scope applies.
	Scope ScopeRule
}

// ScopeRule is how a caller's scope applies to an endpoint or message.
type ScopeRule int

const (
	// NoObject: there is nothing to hold to a scope (the caller's own
	// identity, a heartbeat).
	NoObject ScopeRule = iota
	// PathDevice: the path's {id} is a device; one outside the scope is
	// 404, as one not enrolled is.
	PathDevice
	// PathTask: the path's {id} is a task; one outside the scope is 404,
	// as one that does not exist is.
	PathTask
	// InHandler: the handler lists only what is in scope, and takes a
	// device or tool outside it as one that does not exist (lists, and
	// requests whose bodies name devices and tools).
	InHandler
	// LinkTarget: a constellation's message about its target device,
	// which was in scope when it registered (else it was refused as a
	// target that is not connected).
	LinkTarget
	// WholeFleet: the endpoint covers every device (metrics, identities):
	// a scoped identity may not use it (403).
	WholeFleet
)

// policy is the access policy, in one table: every route of the HTTP
// API, by the key its route table gives it (its method and pattern), and
// every message type a constellation sends, as "WS type", and every tool
// of the MCP gateway, as "MCP tool". Anything without an entry is refused
// (default deny): tests check every route of the table (and every
// endpoint of openapi.json), every message type and every MCP tool
// against it, and that every route's rule is some route's. A device's own
// messages (command_results, device_info_response, token_rotated) have
// none: a device link is its device's token or certificate, and speaks
// only for that device.
var policy = map[string]Rule{
	"GET /api/health":                  {Public: true},
	"GET /api/openapi.json":            {Public: true},
	"POST /api/login":                  {Public: true},
	"POST /api/logout":                 {Public: true},
	"GET /api/whoami":                  {Role: access.Viewer, Scope: NoObject},
	"GET /api/version":                 {Role: access.Viewer, Scope: NoObject},
	"GET /api/clients":                 {Role: access.Viewer, Scope: InHandler},
	"GET /api/devices":                 {Role: access.Viewer, Scope: InHandler},
	"GET /api/devices/{id}":            {Role: access.Viewer, Scope: PathDevice},
	"GET /api/devices/{id}/tools":      {Role: access.Viewer, Scope: PathDevice},
	"GET /api/tasks":                   {Role: access.Viewer, Scope: InHandler},
	"GET /api/tasks/{id}":              {Role: access.Viewer, Scope: PathTask},
	"GET /api/tasks/{id}/events":       {Role: access.Viewer, Scope: PathTask},
	"GET /api/task_result/{task_name}": {Role: access.Viewer, Scope: InHandler},
	"GET /api/audit":                   {Role: access.Viewer, Scope: InHandler},
	"GET /metrics":                     {Role: access.Viewer, Scope: WholeFleet},
	"GET /api/cluster":                 {Role: access.Operator, Scope: WholeFleet},
	"POST /api/devices/{id}/commands":  {Role: access.Operator, Scope: PathDevice},
	"POST /api/dispatch":               {Role: access.Operator, Scope: InHandler},
	"POST /api/fleets":                 {Role: access.Operator, Scope: InHandler},
	"POST /api/admission":              {Role: access.Operator, Scope: InHandler},
	"POST /api/tasks/{id}/cancel":      {Role: access.Operator, Scope: PathTask},
	"DELETE /api/tasks/{id}":           {Role: access.Operator, Scope: PathTask},
	"POST /api/devices/{id}/tools":     {Role: access.Deployer, Scope: PathDevice},
	"GET /api/rollouts":                {Role: access.Viewer, Scope: InHandler},
	"GET /api/rollouts/{name}":         {Role: access.Viewer, Scope: InHandler},
	"GET /api/rollouts/{name}/history": {Role: access.Viewer, Scope: InHandler},
	// Releases are builds of the agent, no device's.
	"GET /api/releases": {Role: access.Viewer, Scope: NoObject},
	// A rollout reaches the devices that gain its labels later, beyond
	// what a scope can check when it is applied.
	"PUT /api/modules/{sha256}":                       {Role: access.Deployer, Scope: WholeFleet},
	"PUT /api/releases/{sha256}":                      {Role: access.Deployer, Scope: WholeFleet},
	"POST /api/rollouts":                              {Role: access.Deployer, Scope: WholeFleet},
	"POST /api/rollouts/{name}/pause":                 {Role: access.Deployer, Scope: WholeFleet},
	"POST /api/rollouts/{name}/resume":                {Role: access.Deployer, Scope: WholeFleet},
	"POST /api/rollouts/{name}/rollback":              {Role: access.Deployer, Scope: WholeFleet},
	"PATCH /api/devices/{id}/labels":                  {Role: access.Admin, Scope: PathDevice},
	"POST /api/devices":                               {Role: access.Admin, Scope: InHandler},
	"DELETE /api/devices/{id}":                        {Role: access.Admin, Scope: PathDevice},
	"POST /api/devices/{id}/token":                    {Role: access.Admin, Scope: PathDevice},
	"POST /api/devices/{id}/certificate":              {Role: access.Admin, Scope: PathDevice},
	"GET /api/identities":                             {Role: access.Admin, Scope: WholeFleet},
	"POST /api/identities":                            {Role: access.Admin, Scope: WholeFleet},
	"DELETE /api/identities/{name}":                   {Role: access.Admin, Scope: WholeFleet},
	"POST /api/identities/{name}/tokens":              {Role: access.Admin, Scope: WholeFleet},
	"DELETE /api/identities/{name}/tokens/{token_id}": {Role: access.Admin, Scope: WholeFleet},
	// Go's profiles, with --pprof: not documented API, and for admins,
	// as they show everything the server runs.
	"GET /debug/pprof/": {Role: access.Admin, Scope: WholeFleet},
	// The dashboard's page and files: open; what the page shows, it reads
	// from the API with the login cookie.
	"GET /{$}":     {Public: true},
	"GET /static/": {Public: true},
	// The WebSocket: open at the HTTP layer, as the endpoint itself
	// authenticates a device (its token or certificate) or a
	// constellation (an operator token), and holds each message of a
	// constellation to its rule below ("WS task").
	"GET /ws": {Public: true},

	// The MCP gateway: the endpoint, for any identity; its tools, each by
	// the role it needs, scoped in the tool (what is out of scope does not
	// exist), and held to admission as the API's commands are.
	"POST /mcp":             {Role: access.Viewer, Scope: InHandler},
	"GET /mcp":              {Role: access.Viewer, Scope: InHandler},
	"DELETE /mcp":           {Role: access.Viewer, Scope: InHandler},
	"MCP list_devices":      {Role: access.Viewer, Scope: InHandler},
	"MCP list_device_tools": {Role: access.Viewer, Scope: InHandler},
	"MCP get_task":          {Role: access.Viewer, Scope: InHandler},
	"MCP call_device_tool":  {Role: access.Operator, Scope: InHandler},
	"MCP device_tool":       {Role: access.Operator, Scope: InHandler},
	"MCP dispatch_plan":     {Role: access.Operator, Scope: InHandler},
	"MCP cancel_task":       {Role: access.Operator, Scope: InHandler},

	"WS " + string(protocol.ClientRegister):          {Role: access.Viewer, Scope: LinkTarget},
	"WS " + string(protocol.ClientHeartbeat):         {Role: access.Viewer, Scope: NoObject},
	"WS " + string(protocol.ClientDeviceInfoRequest): {Role: access.Viewer, Scope: LinkTarget},
	"WS " + string(protocol.ClientTaskEnd):           {Role: access.Viewer, Scope: NoObject},
	"WS " + string(protocol.ClientError):             {Role: access.Viewer, Scope: NoObject},
	"WS " + string(protocol.ClientTask):              {Role: access.Operator, Scope: LinkTarget},
}

// RuleFor is the policy's rule for key, and whether it has one.
func RuleFor(key string) (Rule, bool) {
	ru, ok := policy[key]
	return ru, ok
}

// Keys lists the keys the policy has rules for, sorted: for the tests
// that hold each surface to it.
func Keys() []string { return slices.Sorted(maps.Keys(policy)) }

// MessageKey is the policy's key of a message type.
func MessageKey(t protocol.ClientMessageType) string { return "WS " + string(t) }

// MCPKey is the policy's key of an MCP tool.
func MCPKey(tool string) string { return "MCP " + tool }

// Forbidden is a caller's request that the policy refuses: 403.
type Forbidden struct {
	// Reason says what was refused, and why.
	Reason string
}

// Error is the reason.
func (e *Forbidden) Error() string { return e.Reason }

// Allows checks a caller against the rule of key: its role, and whether
// a scoped identity may use it at all. Objects in scope are the
// handler's, or the guard's, to check.
func (ru Rule) Allows(c *Caller, key string) error {
	switch {
	case !c.Role.Covers(ru.Role):
		return &Forbidden{fmt.Sprintf("identity %q has role %s: %s needs %s", c.Name, c.Role, key, ru.Role)}
	case ru.Scope == WholeFleet && c.Scoped():
		return &Forbidden{fmt.Sprintf("identity %q is scoped (%s): %s covers the whole fleet", c.Name, c.Scope, key)}
	}
	return nil
}

// Allow checks c against the policy's rule for key, default deny: a key
// with no rule is refused to everyone. Surfaces other than routes call it
// with keys of their own ("WS task"; the MCP gateway's, once it has
// rules); a refusal is a *Forbidden, 403 on HTTP. It checks the role, and
// that a scoped caller may use the key at all: what the request is about
// is held to the scope by each surface through the scope checker
// (internal/inscope), and a tool call by admission (tasks.CommandOrder,
// tasks.PlanOrder).
func Allow(c *Caller, key string) error {
	ru, ok := policy[key]
	if !ok {
		return &Forbidden{fmt.Sprintf("%s has no access policy: refused", key)}
	}
	return ru.Allows(c, key)
}

// AllowMessage checks that c may send a message of type t.
func AllowMessage(c *Caller, t protocol.ClientMessageType) error {
	key := MessageKey(t)
	if _, ok := policy[key]; !ok {
		return &Forbidden{fmt.Sprintf("message type %q is not accepted from a constellation", t)}
	}
	return Allow(c, key)
}
