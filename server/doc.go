// Package server is the gateway of edgeaip. It accepts device agents and
// constellation clients over WebSocket (GET /ws), authenticates them by
// token or, over TLS, by a device certificate, rotates devices' tokens
// over their links, keeps a registry of who is online, runs tasks on devices as
// sessions, dispatches their commands and correlates the results by
// response_id, persists devices, sessions, commands and an append-only
// audit log in SQLite, and serves the operator HTTP API under /api,
// including UFO's endpoints, Prometheus metrics at /metrics and the web
// dashboard at / (internal/httpapi, whose route table lists every route,
// /ws and /mcp among them). Every operator token acts for an identity with a role
// and an optional scope (a device selector and tool patterns), held on
// every surface by one access policy table (internal/identity/policy.go): what is outside a
// scope answers as if it did not exist, and a revoked identity's open
// event streams and constellation links close at once. A fleet runs a plan on every device whose labels match,
// as a session whose children are one plan session per device. Every
// command, plan and fleet passes admission first: the wire's limits, the
// size bounds of Limits, and each call against its device's tools and
// their input schemas, all checked before anything is recorded or sent.
//
// The session manager follows UFO's Session Manager: a session per task,
// run in the background, ending with a TASK_END to whoever asked. The
// dispatcher follows UFO's Command Dispatcher, except that a dropped link
// is not a failure: a command waits for its device to come back within its
// timeout and is sent again on the new link. RATIONALE.md explains why,
// and the contract the agent keeps for it.
package server
