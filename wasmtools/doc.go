// Package wasmtools is the home of everything about tool modules as
// artifacts. Its subpackages:
//
//   - section reads and edits a module's sections: custom sections,
//     imports and exports;
//   - abi tells a tool module's two forms apart: a WASI command, run
//     whole by each call, or a reactor, initialized once and snapshotted;
//   - manifest is a tool's self-description, in the custom section
//     "aip.tool" or a NAME.json sidecar;
//   - schema checks parameters against a manifest's input_schema;
//   - meter instruments a module for fuel: the binary rewriter that makes
//     the guest count what it runs and call the host at safepoints, where
//     the sandbox checks the budget and the deadline; it also puts a
//     reactor in the form a snapshot can start;
//   - signature signs modules (custom section "aip.sig") and checks them
//     against trusted keys;
//   - sdk is the guest side of the tool ABI for Go (GOOS=wasip1), and
//     examples/go an example tool built on it; tools/... holds the stock
//     tools, written in C on wasi-libc (committed built, with their
//     build.sh), and examples/c another tool in C;
//   - scaffold writes a new tool's directory (aipctl tool init), with a
//     copy of the SDK, which this package embeds (SDKSource).
package wasmtools
