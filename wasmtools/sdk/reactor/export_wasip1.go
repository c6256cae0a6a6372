package reactor

import (
	"fmt"
	"os"

	"github.com/edgeaip/edgeaip/wasmtools/sdk"
)

// aipCall is the module's aip_call: it reseeds the runtime's random
// state, then runs the tool, and returns its exit status.
//
//go:wasmexport aip_call
func aipCall() int32 {
	if err := reseed(); err != nil {
		fmt.Fprintf(os.Stderr, "reactor: %v\n", err)
		return sdk.ExitFailed
	}
	if call == nil {
		fmt.Fprintln(os.Stderr, "reactor: no tool: call reactor.Handle from an init function")
		return sdk.ExitFailed
	}
	return int32(call())
}
