// Package sandbox runs tool calls: WebAssembly (WASI preview1) modules
// under wazero, each call in a fresh instance of a module compiled once,
// with a deadline, a memory limit, caps on stdout and stderr, and no
// access to files, environment or network beyond what the caller grants.
//
// The tool ABI: the call's parameters arrive on stdin as one JSON object;
// what the tool writes to stdout is its result; exit status 0 is success
// and anything else a failure, explained by the tail of stderr. A module
// is a command, whose _start runs the whole call, or a reactor, which is
// initialized once per loaded version (its own fuel, deadline and memory
// limit; a failure refuses it) and whose every call starts a fresh
// instance from a snapshot of that, mapped copy-on-write, and runs
// aip_call ([Start], [Tool.Initialization]).
//
// The surface is small on purpose, in the manner of wazero itself: a
// [Sandbox] built from a [Config], [Sandbox.Load] to check a [Tool] from a
// [Spec] (instrumenting it for fuel follows in the background, and
// [Tool.Ready] waits for it; a call, or [Tool.Prepare], has its tool
// prepared at once, ahead of the rest, and [WithPreparationTrace] hears
// how far along that is), and [Sandbox.Call] to run it. A [Policy] turns
// what a tool's manifest requests into a Spec: the intersection of
// request and grant.
//
// What a call is held to:
//   - its parameters must satisfy the tool's input schema, or it does not
//     run;
//   - it waits for admission: at most N calls run at once, and together
//     they reserve no more than a set amount of memory;
//   - granted directories are confined with os.Root: no "..", absolute
//     path or symbolic link leads out, nor may the tool make or move a
//     symbolic link that would, and an attempt fails the call with
//     ErrDenied naming the path.
//
// The compile cache (Config.WithCacheDir) holds, per cost model,
// instrumented copies sealed with their own digest and wazero's compiled
// code:
//
//	DIR/cost-model-V/metered/SHA.wasm      instrumented copy of the module SHA
//	DIR/cost-model-V/metered/SHA.compiled  the entries of compiled/ that are its code
//	DIR/cost-model-V/metered/SHA.source    the files the module SHA was loaded from
//	DIR/cost-model-V/compiled/...          wazero's cache
//
// A copy that fails its seal is removed and made again from the module.
// New removes the directories of other cost models; [Sandbox.PruneCache]
// removes, for the one process that owns the cache, what it has reason
// to: modules no loaded tool uses whose files are gone, and what is past
// the cache's limits (Config.WithCacheLimits), logging each removal.
//
// RATIONALE.md explains the choices.
package sandbox
