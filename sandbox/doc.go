// Package sandbox runs tool calls: WebAssembly (WASI preview1 command)
// modules under wazero, each call in a fresh instance of a module compiled
// once, with a deadline, a memory limit, caps on stdout and stderr, and no
// access to files, environment or network beyond what the caller grants.
//
// The tool ABI: the call's parameters arrive on stdin as one JSON object;
// what the tool writes to stdout is its result; exit status 0 is success
// and anything else a failure, explained by the tail of stderr.
//
// The surface is small on purpose, in the manner of wazero itself: a
// [Sandbox] built from a [Config], [Sandbox.Load] to compile a [Tool], and
// [Sandbox.Call] to run it.
package sandbox
