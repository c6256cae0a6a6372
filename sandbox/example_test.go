package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
)

// A tool is loaded once and called any number of times, each call in a
// fresh instance: the parameters go in on stdin, the result comes back
// from stdout, with what the call used.
func Example() {
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.NewConfig())
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close(ctx)

	wasm, err := os.ReadFile("../testdata/tools/echo.wasm") // copies stdin to stdout
	if err != nil {
		log.Fatal(err)
	}
	echo, err := sb.Load(ctx, sandbox.Spec{Name: "echo", Wasm: wasm})
	if err != nil {
		log.Fatal(err)
	}

	res := sb.Call(ctx, echo, []byte(`{"greeting": "hello"}`))
	if res.Err != nil {
		log.Fatal(res.Err)
	}
	fmt.Printf("%s\n", res.Stdout)
	fmt.Println(res.Usage.StdoutBytes, "bytes out,", res.Usage.MemoryPages, "page of memory")
	// Output:
	// {"greeting": "hello"}
	// 21 bytes out, 1 page of memory
}

// An agent loads what a tool's manifest asks for, as far as the
// operator's policy grants it: here a directory the manifest does not
// request, which the tool therefore does not get. Parameters that do not
// satisfy the manifest's input schema fail the call before the tool runs.
func ExampleSandbox_Load() {
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.NewConfig())
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close(ctx)

	// echo.json beside the module is its manifest, as during development;
	// a shipped module carries it in its aip.tool section.
	mod, err := manifest.Load("../testdata/tools/echo.wasm")
	if err != nil {
		log.Fatal(err)
	}
	policy := sandbox.Policy{Dirs: []sandbox.Mount{{HostPath: os.TempDir(), GuestPath: "/tmp"}}}
	echo, err := sb.Load(ctx, policy.Spec(mod, os.LookupEnv))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(echo.Name(), "mounts:", len(echo.Mounts()), "timeout:", echo.Limits().Timeout)

	res := sb.Call(ctx, echo, []byte(`["not", "an", "object"]`))
	fmt.Println(errors.Is(res.Err, sandbox.ErrInvalidParams))
	fmt.Println(res.Err)
	// Output:
	// echo mounts: 0 timeout: 30s
	// true
	// tool "echo": invalid parameters: parameters: got array, want object
}

// A call that fails says why in Result.Err, which wraps one of the Err*
// values: a budget spent, a deadline passed, a non-zero exit status with
// the tail of the tool's stderr.
func ExampleSandbox_Call() {
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.NewConfig())
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close(ctx)

	load := func(name string, limits sandbox.Limits) *sandbox.Tool {
		wasm, err := os.ReadFile("../testdata/tools/" + name + ".wasm")
		if err != nil {
			log.Fatal(err)
		}
		t, err := sb.Load(ctx, sandbox.Spec{Name: name, Wasm: wasm, Limits: limits})
		if err != nil {
			log.Fatal(err)
		}
		return t
	}

	spin := load("spin", sandbox.Limits{Fuel: 1_000_000}) // loops forever
	res := sb.Call(ctx, spin, nil)
	fmt.Println(errors.Is(res.Err, sandbox.ErrOutOfFuel), res.Usage.Fuel > 1_000_000)

	fail := load("fail", sandbox.Limits{}) // exits with status 3
	res = sb.Call(ctx, fail, nil)
	fmt.Println(errors.Is(res.Err, sandbox.ErrExit))
	fmt.Println(res.Err)
	// Output:
	// true true
	// true
	// tool "fail": exited with status 3: disk on fire
}
