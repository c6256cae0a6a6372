// Command aip-agent is the edgeaip device agent. It dials out to the server,
// registers the device and runs the commands it is sent, with tools as
// sandboxed WebAssembly modules.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/logging"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var cfg agent.Config
	var tools, dirs, keys, env listFlag
	var wire, reserve string
	var requireSigned bool
	flag.StringVar(&cfg.ServerURL, "server", "ws://127.0.0.1:8700/ws", "server WebSocket URL")
	flag.StringVar(&cfg.ID, "id", "", "device id, as enrolled with aipctl device enroll")
	flag.StringVar(&cfg.TokenFile, "token-file", "", "file holding the device token")
	flag.Var(&tools, "tools", "directory of tool modules, DIR or NAMESPACE=DIR (repeatable)")
	flag.Var(&dirs, "allow-dir", "host directory tools may use, HOST[:GUEST][:ro] (repeatable)")
	flag.StringVar(&cfg.DataDir, "data", "", "data directory: compile cache and agent state")
	flag.DurationVar(&cfg.HeartbeatInterval, "heartbeat", 20*time.Second, "heartbeat interval")
	flag.StringVar(&wire, "wire", "cbor", "wire encoding: cbor (edgeaip server) or json (UFO server)")
	flag.Var(&keys, "trusted-key", "PEM public key file tool signatures are checked against (repeatable)")
	flag.BoolVar(&requireSigned, "require-signed", false, "refuse unsigned tool modules (default: true once a --trusted-key is given)")
	flag.Var(&env, "allow-env", "environment variable tools may read, if their manifest asks (repeatable)")
	flag.IntVar(&cfg.MaxConcurrentCalls, "max-calls", 0, "tool calls that run at once; the rest queue (default GOMAXPROCS)")
	flag.StringVar(&reserve, "max-call-memory", "", "memory running tool calls may reserve together, e.g. 256MiB (default 256MiB)")
	var logOpts logging.Options
	logOpts.RegisterFlags(flag.CommandLine)
	flag.Parse()

	log := logOpts.New(os.Stderr)
	cfg.Logger, cfg.ToolDirs, cfg.AllowEnv = log, tools, env
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "require-signed" {
			cfg.RequireSigned = &requireSigned
		}
	})
	if err := configure(&cfg, dirs, keys, wire, reserve); err != nil {
		fmt.Fprintln(os.Stderr, "aip-agent:", err)
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		log.Error("aip-agent failed", "err", err)
		os.Exit(1)
	}
}

func configure(cfg *agent.Config, dirs, keys []string, wire, reserve string) error {
	for _, d := range dirs {
		m, err := sandbox.ParseMount(d)
		if err != nil {
			return fmt.Errorf("--allow-dir: %w", err)
		}
		cfg.Mounts = append(cfg.Mounts, m)
	}
	for _, k := range keys {
		pub, err := signature.LoadPublicKey(k)
		if err != nil {
			return fmt.Errorf("--trusted-key: %w", err)
		}
		cfg.TrustedKeys = append(cfg.TrustedKeys, pub)
	}
	if reserve != "" {
		n, err := manifest.ParseByteSize(reserve)
		if err != nil {
			return fmt.Errorf("--max-call-memory: %w", err)
		}
		cfg.MaxReservedMemory = uint64(n)
	}
	switch wire {
	case "cbor":
		cfg.Wire = protocol.CBOR
	case "json":
		cfg.Wire = protocol.JSON
	default:
		return fmt.Errorf("--wire: want cbor or json, got %q", wire)
	}
	return nil
}

func run(cfg agent.Config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a, err := agent.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer a.Close(context.Background())
	return a.Run(ctx)
}
