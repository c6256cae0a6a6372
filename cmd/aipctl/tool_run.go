package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/sandbox/wasmtool"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/spf13/cobra"
)

// runOptions are aipctl tool run's flags: the policy to run under, and
// where to keep compiled code.
type runOptions struct {
	params  string
	fuel    uint64
	timeout time.Duration
	memory  string
	dirs    []string
	env     []string
	cache   string
}

func newRunCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run MODULE.wasm [KEY=VALUE...] [--params JSON] [--allow-dir HOST[:GUEST][:ro]...]",
		Short: "Run a tool once, locally, in the agent's sandbox, and print its Result with usage",
		Long: `Run a tool once, locally, in the agent's sandbox, and print its Result
with usage as JSON: the same manifest reading, capability intersection,
parameter validation, limits and confinement as on a device. The module
need not be signed.

--allow-dir and --allow-env are the policy: the tool gets what its manifest
requests of them, and nothing else. --fuel, --timeout and --memory override
the manifest's limits; --memory may go past the 64MiB an agent allows by
default. Parameters come as with aipctl exec.

It says on stderr how the tool's calls start: a reactor from a snapshot
of its initialization (and what initializing took), or plainly; a
command as ABI v1.

Exits 0 when the tool succeeded and 1 when it failed.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The manifest types the parameters; one that does not load is
			// reported by the run itself.
			var schema map[string]any
			if mod, err := manifest.Load(args[0]); err == nil {
				schema = mod.Manifest.InputSchema
			}
			params, _, err := buildParams(o.params, args[1:], schema)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			pol, err := o.policy()
			if err != nil {
				return &exitError{exitUsage, err}
			}
			cfg := sandbox.NewConfig()
			if pages := pol.Limits.MemoryPages; pages > 0 {
				// The author's --memory is the authority here: raise the
				// sandbox's ceiling, which an agent's operator sets, to it.
				cfg = cfg.WithLimits(sandbox.Limits{MemoryPages: pages}).
					WithMaxReservedMemory(max(sandbox.DefaultMaxReservedMemory, uint64(pages)*wasmPage))
			}
			if o.cache != "" {
				cfg = cfg.WithCacheDir(o.cache)
			}
			return runLocal(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg, args[0], pol, params)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.params, "params", "", "parameters as a JSON object")
	f.Uint64Var(&o.fuel, "fuel", 0, "fuel budget, in operators executed (default: the manifest's, else 10 billion)")
	f.DurationVar(&o.timeout, "timeout", 0, "deadline of the call (default: the manifest's, else 30s)")
	f.StringVar(&o.memory, "memory", "", "memory limit, e.g. 32MiB (default: the manifest's, else 64MiB)")
	f.StringArrayVar(&o.dirs, "allow-dir", nil, "grant a host directory, HOST[:GUEST][:ro] (repeatable)")
	f.StringArrayVar(&o.env, "allow-env", nil, "grant an environment variable, if the manifest asks (repeatable)")
	f.StringVar(&o.cache, "cache", defaultCacheDir(), "keep compiled modules here, as an agent does (empty: compile every run)")
	return cmd
}

// A WebAssembly page, and the most a 32-bit memory holds: a larger
// --memory would wrap around in the page count.
const (
	wasmPage  = 64 << 10
	maxMemory = 1 << 16 * wasmPage
)

func (o runOptions) policy() (sandbox.Policy, error) {
	pol := sandbox.Policy{Env: o.env, Limits: sandbox.Limits{Fuel: o.fuel, Timeout: o.timeout}}
	for _, d := range o.dirs {
		m, err := sandbox.ParseMount(d)
		if err != nil {
			return pol, fmt.Errorf("--allow-dir: %w", err)
		}
		pol.Dirs = append(pol.Dirs, m)
	}
	if o.memory != "" {
		n, err := manifest.ParseByteSize(o.memory)
		if err != nil {
			return pol, fmt.Errorf("--memory: %w", err)
		}
		if n > maxMemory {
			return pol, fmt.Errorf("--memory: %s is more than 4GiB, all a 32-bit WebAssembly memory holds", o.memory)
		}
		pol.Limits.MemoryPages = uint32((uint64(n) + wasmPage - 1) / wasmPage)
	}
	return pol, nil
}

// defaultCacheDir is the user's cache dir for compiled modules, or empty
// when the user has none.
func defaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "edgeaip", "compile-cache")
}

func runLocal(ctx context.Context, stdout, stderr io.Writer, cfg sandbox.Config, path string, pol sandbox.Policy, params map[string]any) error {
	sb, err := sandbox.New(ctx, cfg)
	if err != nil {
		return &exitError{exitFailed, err}
	}
	defer sb.Close(context.WithoutCancel(ctx))
	tool, err := wasmtool.LoadFile(ctx, sb, path, pol, os.LookupEnv)
	if err != nil {
		return &exitError{exitUsage, err}
	}
	for _, m := range tool.Module().Mounts() {
		fmt.Fprintf(stderr, "granted %s\n", m)
	}
	res := tool.Call(ctx, params)
	// A call refused before it started did not wait for initialization;
	// wait here, so that the line says what initializing took.
	if err := tool.Module().Ready(ctx); err != nil {
		fmt.Fprintf(stderr, "start: not ready: %v\n", err)
	} else {
		fmt.Fprintln(stderr, startText(tool.Module()))
	}
	if err := printJSON(stdout, res); err != nil {
		return &exitError{exitFailed, err}
	}
	if res.Error != "" {
		return &exitError{code: exitFailed}
	}
	return nil
}

// startText says how the tool's calls start, and what initializing it
// took or why it could not start from a snapshot.
func startText(t *sandbox.Tool) string {
	in := t.Initialization()
	switch {
	case t.Start() == sandbox.StartSnapshot:
		u := in.Usage
		return fmt.Sprintf("start: from a snapshot (reactor; initialized once: fuel %d, %s, %d pages)", u.Fuel, u.Wall.Round(time.Microsecond), u.MemoryPages)
	case in.Fallback != nil:
		return fmt.Sprintf("start: plain (reactor, initialized by each call: %v)", in.Fallback)
	case t.Start() == sandbox.StartPlain:
		return "start: plain (reactor, initialized by each call)"
	}
	return "start: command (ABI v1)"
}
