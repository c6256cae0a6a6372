// Package server is the device gateway of edgeaip. It accepts device agents
// over WebSocket (GET /ws), authenticates them by token, keeps a registry of
// who is online, dispatches commands and correlates their results by
// response_id, persists every command and result in SQLite, and serves the
// operator HTTP API under /api.
//
// The dispatcher follows UFO's Command Dispatcher: each COMMAND parks a
// future under its response_id; the device's COMMAND_RESULTS, a timeout or
// a dropped link resolves it, so every command ends in Results and nothing
// hangs.
package server
