// Package agent is the device side of edgeaip: it keeps a link to the
// server, registers the device with its system info and tool inventory, and
// runs the commands the server sends, in the manner of UFO's Command Layer.
//
// A command's actions are resolved by a [Computer], whose registry is keyed
// "tool_type::tool_name" as in UFO, and executed in order by a [Router]:
// after a failure the remaining actions are skipped (early exit). Tools are
// WebAssembly modules run by package sandbox.
package agent
