// Package protocol carries the Agent Interaction Protocol (AIP) of Microsoft
// UFO: its message model, its two encodings, and the WebSocket transport that
// moves messages between a device agent and the server.
//
// The model mirrors UFO's pydantic classes field for field, with UFO's
// snake_case names on the wire. Two encodings share it:
//
//   - aip.cbor.v1, negotiated as the WebSocket subprotocol: binary frames, one
//     CBOR map each, in Core Deterministic Encoding, optional fields omitted.
//   - JSON, when no subprotocol is negotiated: text frames, compatible with
//     what UFO's server and clients emit and accept.
//
// Decoding is strict in both: frames have a size cap, nesting and collection
// sizes are bounded, duplicate keys and invalid UTF-8 are rejected, and every
// enum is checked. A rejected frame is answered with an ERROR message and the
// connection stays up (see [Conn]).
//
// The server and the agent share nothing but this package.
package protocol
