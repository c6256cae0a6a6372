// Package reactor builds a Go tool in the reactor form of the edgeaip tool
// ABI: a module that exports aip_call, which the agent initializes once
// per loaded version (the Go runtime's start-up and the package inits, in
// _initialize), snapshots, and starts every call from. A call then skips
// the runtime's start-up: a stock tool's took a seventh of the CPU time.
//
// A tool registers its function in an init function, since main is not
// run in this form, and whatever else it does in init functions is done
// once per loaded version, not once per call: a tool can warm the caches
// its calls use there. Handle warms the SDK's own:
//
//	func init() { reactor.Handle(hashFile) }
//
//	func main() {}
//
// and is built as a WASI reactor, with the linker's check of
// go:linkname references off (see Reseeding below):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -ldflags=-checklinkname=0 -o t.wasm .
//
// Built without -buildmode=c-shared, the module would be a command that
// also exports aip_call, which agents and aipctl refuse.
//
// # What a snapshot freezes
//
// Every call starts from the state initialization left, so whatever the
// package inits computed is computed once per loaded version: a clock read
// in an init function says when the tool was loaded, not called; the
// environment and the granted directories are those of the tool's policy,
// for which the snapshot was taken. A random generator seeded at init, a
// map built at init and its hash seed, are the same in every call.
//
// # Reseeding
//
// The Go runtime seeds its random state during initialization: the
// generator behind math/rand/v2's and math/rand's top-level functions,
// map iteration order, the seeds of maps made later, and the scheduler's
// cheap randomness. Taken as is, every call would draw the same numbers.
// So before each call this package seeds that state anew from the host's
// randomness, through the runtime's own functions (runtime.mrandinit, and
// internal/chacha8rand for the runtime's global generator). They are not
// exported: reaching them takes go:linkname, which the linker refuses
// unless built with -ldflags=-checklinkname=0, and a layout of the
// runtime's global generator that this package checks it finds, and was
// written for Go 1.26 only; another Go version fails to build it. crypto/rand
// needs nothing: it asks the host for every read.
package reactor

import (
	"crypto/rand"
	"io"
	"os"
	"strings"

	"github.com/edgeaip/edgeaip/wasmtools/sdk"
)

// call runs the tool once; Handle sets it.
var call func() int

// Handle makes fn the tool: each call of the module runs it once, as
// sdk.Invoke does, on the parameters on stdin. Call it from an init
// function, or a package variable's initializer, so that it is part of
// the snapshot.
func Handle[P any](fn func(P) (any, error)) {
	call = func() int { return sdk.Invoke(os.Stdin, os.Stdout, os.Stderr, fn) }
	warmUp[P]()
}

// warmUp runs the SDK's path once, while the module initializes, on empty
// parameters and with a stand-in for the tool that returns a result of
// the usual shape, in memory: what that path builds on first use
// (encoding/json's decoder for P and encoder for maps, reflect's type
// data) is then in the snapshot, and no call builds it again. The tool
// itself does not run: it may have effects. It also reads crypto/rand
// once, as every call's reseed does: the first read of a process arms a
// timer that warns if the read blocks, which would otherwise be armed in
// every call. For hash_file this took a call from 494 000 units of fuel
// to 222 000.
func warmUp[P any]() {
	var b [32]byte
	rand.Read(b[:])
	sdk.Invoke(strings.NewReader("{}"), io.Discard, io.Discard, func(P) (any, error) {
		return map[string]any{"name": "", "size": 0, "ok": false}, nil
	})
}
