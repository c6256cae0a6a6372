// Package sdk is the guest side of the edgeaip tool ABI, for tools written
// in Go and compiled with GOOS=wasip1 GOARCH=wasm.
//
// The ABI: a tool's parameters arrive on stdin as one JSON object; what it
// writes to stdout is its result, taken as JSON when it is JSON; exit
// status 0 is success, and anything else is failure, with the tail of
// stderr as the error.
//
// With this package a tool is a function. Package
// [github.com/edgeaip/edgeaip/wasmtools/sdk/reactor] builds it in the
// reactor form, which an agent initializes once and starts every call from
// a snapshot of: the Go runtime's start-up, some 8 ms, is paid once per
// loaded version instead of at every call. Run builds it as a WASI
// command, whose every call starts the runtime afresh (ABI v1):
//
//	type params struct {
//		Path string `json:"path"`
//	}
//
//	func main() {
//		sdk.Run(func(p params) (any, error) {
//			b, err := os.ReadFile(p.Path)
//			return map[string]any{"size": len(b)}, err
//		})
//	}
package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Exit statuses of a tool run by Run.
const (
	ExitFailed    = 1 // fn returned an error
	ExitBadParams = 2 // stdin was not a JSON object matching P
)

// Run runs the tool fn as a WASI command: Invoke on the process's stdin,
// stdout and stderr, then exit with its status. It does not return.
func Run[P any](fn func(P) (any, error)) {
	os.Exit(Invoke(os.Stdin, os.Stdout, os.Stderr, fn))
}

// Invoke runs the tool fn once: it reads the parameters from stdin into a
// P, calls fn, and writes its result to stdout as JSON. If fn fails, or
// the parameters do not decode, it writes the error to stderr. It returns
// the exit status: 0, ExitFailed or ExitBadParams.
func Invoke[P any](stdin io.Reader, stdout, stderr io.Writer, fn func(P) (any, error)) int {
	var p P
	dec := json.NewDecoder(stdin)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil && err != io.EOF {
		fmt.Fprintf(stderr, "parameters: %v\n", err)
		return ExitBadParams
	}
	result, err := fn(p)
	if err != nil {
		fmt.Fprintln(stderr, explain(err))
		return ExitFailed
	}
	if err := json.NewEncoder(stdout).Encode(result); err != nil {
		fmt.Fprintf(stderr, "result: %v\n", err)
		return ExitFailed
	}
	return 0
}

// explain rewords errors whose WASI form says little. Under wasip1 a path
// that lies under no preopened directory fails with EBADF ("bad file
// number"): the host did not grant that path. EPERM on a path means the
// host refused to follow it out of a granted directory, through a
// symbolic link; EROFS, that the directory was granted read-only.
func explain(err error) error {
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe) && errors.Is(pe.Err, syscall.EBADF):
		return fmt.Errorf("%s %s: not under a directory this tool was granted", pe.Op, pe.Path)
	case errors.As(err, &pe) && errors.Is(pe.Err, syscall.EPERM):
		return fmt.Errorf("%s %s: refused by the host: it leads out of the directory this tool was granted", pe.Op, pe.Path)
	case errors.As(err, &pe) && errors.Is(pe.Err, syscall.EROFS):
		return fmt.Errorf("%s %s: this tool was granted that directory read-only", pe.Op, pe.Path)
	}
	return err
}
