// Package wasmtool is the adapter between tool modules and AIP: it loads
// a module with its manifest, under an operator's policy, into a sandbox,
// calls it with a command's parameters, and shapes the outcome as the
// protocol.Result an agent sends. The agent and aipctl tool run both go
// through it, so a tool runs on its author's machine as it runs on a
// device.
//
// It imports the sandbox, the protocol's types and the manifest, and
// nothing of the agent: aipctl stays small.
package wasmtool

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
)

// Tool is a tool module loaded into a sandbox, with its manifest.
type Tool struct {
	sb       *sandbox.Sandbox
	mod      *sandbox.Tool
	manifest manifest.Manifest
	source   manifest.Source
}

// Load loads mod into sb under pol: the module gets what its manifest
// requests of the directories and environment variables pol grants
// (lookupEnv reads the host's, as os.LookupEnv does), within its limits
// and pol's. The sandbox instruments it in the background; calls wait
// for that.
func Load(ctx context.Context, sb *sandbox.Sandbox, mod manifest.Module, pol sandbox.Policy, lookupEnv func(string) (string, bool)) (*Tool, error) {
	t, err := sb.Load(ctx, pol.Spec(mod, lookupEnv))
	if err != nil {
		return nil, err
	}
	return &Tool{sb: sb, mod: t, manifest: mod.Manifest, source: mod.Source}, nil
}

// LoadFile reads the module at path, with its embedded or sidecar
// manifest, and loads it as Load does.
func LoadFile(ctx context.Context, sb *sandbox.Sandbox, path string, pol sandbox.Policy, lookupEnv func(string) (string, bool)) (*Tool, error) {
	mod, err := manifest.Load(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return Load(ctx, sb, mod, pol, lookupEnv)
}

// Manifest is what the module says of itself.
func (t *Tool) Manifest() manifest.Manifest { return t.manifest }

// Source says whether the manifest was embedded in the module or a
// sidecar file.
func (t *Tool) Source() manifest.Source { return t.source }

// Module is the loaded module: to wait until it is instrumented, to read
// what it was granted, or to close it.
func (t *Tool) Module() *sandbox.Tool { return t.mod }

// Run calls the tool once with params, as a JSON object on its stdin, and
// returns the sandbox's outcome. The error is for parameters that are not
// JSON; the call's own failure is in the outcome.
func (t *Tool) Run(ctx context.Context, params map[string]any) (sandbox.Result, error) {
	if params == nil {
		params = map[string]any{}
	}
	in, err := json.Marshal(params)
	if err != nil {
		return sandbox.Result{}, fmt.Errorf("tool %q: parameters: %w", t.manifest.Name, err)
	}
	return t.sb.Call(ctx, t.mod, in), nil
}

// Call runs the tool once with params and returns its Result.
func (t *Tool) Call(ctx context.Context, params map[string]any) protocol.Result {
	out, err := t.Run(ctx, params)
	if err != nil {
		return protocol.Result{Status: protocol.ResultFailure, Error: err.Error()}
	}
	return Result(out)
}

// Result turns a sandbox call's outcome into the Result an agent sends:
// stdout parsed as JSON when it is JSON, and the usage.
func Result(out sandbox.Result) protocol.Result {
	res := protocol.Result{
		Status: protocol.ResultSuccess,
		Usage: &protocol.Usage{
			Fuel:        out.Usage.Fuel,
			WallMicros:  out.Usage.Wall.Microseconds(),
			MemoryPages: out.Usage.MemoryPages,
			StdoutBytes: out.Usage.StdoutBytes,
		},
	}
	if out.Err != nil {
		res.Status, res.Error = protocol.ResultFailure, out.Err.Error()
		return res
	}
	res.Result = parseOutput(out.Stdout)
	return res
}

// parseOutput is the tool's result: JSON when stdout is JSON that the wire
// can carry, otherwise the text itself. It is the one place a tool's
// stdout is parsed; the agent encodes the value once, into the reply
// whose bytes it records and sends.
func parseOutput(stdout []byte) any {
	var v any
	if err := protocol.JSON.UnmarshalValue(stdout, &v); err == nil {
		return v
	}
	return string(stdout)
}
