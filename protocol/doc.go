// Package protocol carries the Agent Interaction Protocol (AIP) of Microsoft
// UFO: its message model, its two encodings, and the WebSocket transport that
// moves messages between a device agent and the server.
//
// The model mirrors UFO's pydantic classes field for field, with UFO's
// snake_case names as the keys in both encodings:
//
//   - aip.cbor.v1, negotiated as the WebSocket subprotocol: binary frames, one
//     CBOR map each, in Core Deterministic Encoding, optional fields omitted,
//     so equal messages encode to equal bytes.
//   - JSON, when no subprotocol is negotiated: text frames, as UFO's pydantic
//     models emit and accept them.
//
// Both encodings decode through one strict decoder: frames have a size cap,
// nesting and collection sizes are bounded, duplicate keys and invalid UTF-8
// are rejected, keys are case-sensitive, and every enum is checked, with an
// error that names the field and the value. A rejected frame is answered
// with an ERROR message and the connection stays up (see [Conn.Read]).
// Messages are encoded and decoded by a fast path, its per-field code
// generated from the message structs, that gives the same results; on any
// frame it cannot vouch for, it leaves the decoding, and the verdict, to
// the strict decoder.
//
// RATIONALE.md explains these choices; testdata/protocol holds a golden
// frame for every message type as UFO emits it, with the CBOR and JSON we
// emit for it.
//
// The server and the agent share nothing but this package.
package protocol
