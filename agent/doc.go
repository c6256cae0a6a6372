// Package agent is the device side of edgeaip: it keeps a link to the
// server, registers the device with its system info and tool inventory, and
// runs the commands the server sends, in the manner of UFO's Command Layer.
//
// A [ComputerManager] holds one [Computer] per
// agent_name::process_name::root_name of the commands; each Computer's
// registry is keyed "tool_type::tool_name" and holds the device's wasm
// tools (run by package sandbox) and the tools of the MCP servers its config
// names, which the agent proxies. A [Router] checks a command's actions
// against the tools' input schemas and executes them in order, skipping the
// rest after a failure (early exit).
//
// The link loses nothing: commands are recorded before they run and their
// results before they count as done, in an on-disk outbox that answers a
// command sent twice without running it again and delivers results after
// the next registration until the server acknowledges them. RATIONALE.md
// explains the outbox's format and its crash points.
//
// [LoadConfig] reads the agent's YAML config; agent.example.yaml documents
// it.
package agent
