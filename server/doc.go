// Package server is the control plane of edgeaip: it accepts device
// agents and constellation clients over WebSocket (GET /ws), runs tasks on
// devices as sessions, dispatches their commands and records every result
// and an append-only audit log, and serves the operator HTTP API under
// /api (UFO's endpoints among it), MCP at /mcp, Prometheus metrics at
// /metrics and the web dashboard at /. One node keeps its store in SQLite;
// nodes of a cluster share PostgreSQL and talk over NATS.
//
// This package only wires the parts in internal/ (New, Config, Handler,
// Drain, Close): the surfaces (httpapi, whose route table lists every
// route and its access policy key; mcpgateway; wsgateway), the front door
// they all call (tasks: admission, sessions, fleets), the scope checker
// (inscope), identities and TLS (identity), the links and the dispatcher
// (dispatch), the cluster's membership (cluster) and the store.
// RATIONALE.md maps them and explains why, and the contract the agent
// keeps for a link that loses nothing.
package server
