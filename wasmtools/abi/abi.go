// Package abi tells apart the two forms a tool module takes under the
// edgeaip tool ABI, by the functions it exports.
//
// A command (ABI v1) is a WASI preview1 command: it exports _start, and
// each call runs it in a fresh instance. A reactor is a WASI preview1
// reactor: it exports aip_call, () -> i32, and usually _initialize,
// () -> (). Its initialization (_initialize, and what instantiating it
// does) can run once per loaded version and be snapshotted, and each call
// then runs aip_call in a fresh instance started from that snapshot. In
// both forms the parameters arrive on stdin and the result leaves on
// stdout; a command's exit status is aip_call's return value, or what it
// passes to proc_exit.
package abi

import (
	"errors"
	"fmt"
	"slices"

	"github.com/edgeaip/edgeaip/wasmtools/section"
)

// The functions each form exports.
const (
	// StartExport runs a command once: _start.
	StartExport = "_start"
	// InitExport initializes a reactor: _initialize, () -> (). A reactor
	// without one has nothing to initialize but its data.
	InitExport = "_initialize"
	// CallExport runs a reactor's tool once: aip_call, () -> i32, which
	// returns the exit status.
	CallExport = "aip_call"
)

// Form is the form a tool module takes.
type Form string

// The values of Form.
const (
	Command Form = "command"
	Reactor Form = "reactor"
)

// ErrNoForm means a module is no tool module: it exports neither _start
// nor aip_call.
var ErrNoForm = errors.New("not a tool module: it exports neither _start (a WASI command) nor aip_call (a reactor)")

// FormOf says which form wasm takes. A module that exports both _start
// and aip_call is refused: it is most likely a reactor built as a command
// (a Go tool built without -buildmode=c-shared), whose _start would run
// main and nothing else.
func FormOf(wasm []byte) (Form, error) {
	exports, err := section.Exports(wasm)
	if err != nil {
		return "", err
	}
	has := func(name string) bool {
		return slices.ContainsFunc(exports, func(e section.Export) bool { return e.Name == name && e.Kind == section.KindFunc })
	}
	switch start, call := has(StartExport), has(CallExport); {
	case start && call:
		return "", fmt.Errorf("it exports both %s and %s: a reactor built as a command? (Go: build with -buildmode=c-shared)", StartExport, CallExport)
	case start:
		return Command, nil
	case call:
		return Reactor, nil
	}
	return "", ErrNoForm
}
