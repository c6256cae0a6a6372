// Command aip-agent is the edgeaip device agent. It dials out to the server,
// registers the device and runs the commands it is sent, with tools as
// sandboxed WebAssembly modules and proxied MCP servers.
//
// aip-agent mcp-stdio bridges an MCP client on stdin and stdout to the
// local MCP endpoint (mcp_serve) of the agent running on the device.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/internal/logging"
	"github.com/edgeaip/edgeaip/internal/version"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "mcp-stdio" {
		mcpStdio(os.Args[2:])
		return
	}
	var flags config.Flags
	flags.Register(flag.CommandLine)
	var logOpts logging.Options
	logOpts.RegisterFlags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "print the agent's version, commit, Go version and platform, and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println("aip-agent", version.Get())
		return
	}

	log := logOpts.New(os.Stderr)
	cfg, err := flags.Config()
	if err != nil {
		fmt.Fprintln(os.Stderr, "aip-agent:", err)
		os.Exit(2)
	}
	cfg.Logger = log
	applyMemoryLimit(cfg.MemoryLimit)
	applyGCPercent(cfg.GCPercent)
	cfg.Supervised = os.Getenv(agent.SupervisedEnv)
	if cfg.Supervised == "" && len(cfg.ReleaseKeys) > 0 {
		supervise(cfg, log)
		return
	}
	err = run(cfg)
	switch {
	case errors.Is(err, agent.ErrRestart):
		os.Exit(agent.RestartExitCode)
	case err != nil:
		log.Error("aip-agent failed", "err", err)
		os.Exit(1)
	}
}

// supervise runs the supervisor of an agent that updates itself, until
// SIGINT or SIGTERM.
func supervise(cfg agent.Config, log *slog.Logger) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The supervisor stays resident beside the agent: hand back what
	// starting up took (the config, the packages' init) before it waits.
	debug.FreeOSMemory()
	self, err := os.Executable()
	if err == nil {
		err = agent.Supervise(ctx, cfg, self, os.Args[1:])
	}
	if err != nil {
		log.Error("aip-agent supervisor failed", "err", err)
		os.Exit(1)
	}
}

// mcpStdio is aip-agent mcp-stdio: flags, then the bridge.
func mcpStdio(args []string) {
	fs := flag.NewFlagSet("aip-agent mcp-stdio", flag.ExitOnError)
	file := fs.String("config", "", "the running agent's config `file`, for mcp_serve.listen and its token file")
	url := fs.String("url", "", "the endpoint's `URL` (default: from --config)")
	tokenFile := fs.String("token-file", "", "`file` holding the endpoint's token (default: from --config)")
	var logOpts logging.Options
	logOpts.RegisterFlags(fs)
	fs.Parse(args)
	log := logOpts.New(os.Stderr)
	if *file != "" {
		cfg, err := config.Load(*file)
		if err != nil {
			fmt.Fprintln(os.Stderr, "aip-agent mcp-stdio:", err)
			os.Exit(2)
		}
		u, t, err := agent.LocalEndpoint(cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "aip-agent mcp-stdio: %s: %v\n", *file, err)
			os.Exit(2)
		}
		*url, *tokenFile = cmp.Or(*url, u), cmp.Or(*tokenFile, t)
	}
	if *url == "" || *tokenFile == "" {
		fmt.Fprintln(os.Stderr, "aip-agent mcp-stdio: give --config, or --url and --token-file")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := agent.BridgeStdio(ctx, *url, *tokenFile, os.Stdin, os.Stdout, log); err != nil {
		log.Error("aip-agent mcp-stdio failed", "err", err)
		os.Exit(1)
	}
}

// applyMemoryLimit sets the Go heap's soft limit from the config, unless
// the GOMEMLIMIT environment variable already did.
func applyMemoryLimit(limit int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if limit <= 0 {
		limit = config.DefaultMemoryLimit
	}
	debug.SetMemoryLimit(limit)
}

// applyGCPercent sets the Go collector's target from the config, unless
// the GOGC environment variable already did.
func applyGCPercent(percent int) {
	if os.Getenv("GOGC") != "" {
		return
	}
	if percent <= 0 {
		percent = config.DefaultGCPercent
	}
	debug.SetGCPercent(percent)
}

// run serves until SIGINT or SIGTERM, then shuts down gracefully.
func run(cfg agent.Config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := agent.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close(context.Background())
	// Loading tools reads each module whole (3-4 MB for a Go tool), which
	// is garbage once its instrumented copy is found in the cache; hand it
	// back to the board before settling down. The sandbox does the same
	// for what instrumenting leaves, once it has instrumented the tools.
	debug.FreeOSMemory()
	return a.Run(ctx)
}
