// Package agent is the device side of edgeaip: it keeps a link to the
// server, registers the device with its system info and tool inventory, and
// runs the commands the server sends, in the manner of UFO's Command Layer.
//
// An [Agent] wires its parts, each a package of its own:
//
//   - config (public): the [Config], read from a YAML file and from the
//     command line by one parser, and merged.
//   - internal/link: dials the server, registers, sends heartbeats,
//     reconnects, and delivers results until they are acknowledged.
//   - internal/token: the device token: read at start, and kept when the
//     server rotates it (in the token file, or the data dir).
//   - internal/executor: admits each COMMAND once, runs it in order within
//     its session, and records its results.
//   - internal/outbox: the on-disk journal that records commands before
//     they run and results before they count as done, answers a command
//     sent twice without running it again, and keeps results, as the bytes
//     the link sends, until the server acknowledges them.
//   - internal/computer: UFO's Computer, ComputerManager (Manager) and
//     CommandRouter (Router): one registry of tools per
//     agent_name::process_name::root_name, and the execution of a command's
//     actions with early exit.
//   - internal/toolbox: the device's wasm tools, loaded from the tool dirs,
//     deployments (install_tool) and rollouts (stage_module,
//     apply_revision), called through sandbox/wasmtool.
//   - internal/mcpproxy: the MCP servers the config names, whose tools it
//     publishes to the Computers.
//   - internal/reply: a command's results, encoded once and made to fit a
//     frame.
//
// RATIONALE.md explains the outbox's format and its crash points, and the
// other decisions; agent.example.yaml documents the config.
package agent
