// Command aip-agent is the edgeaip device agent. It dials out to the server,
// registers the device and runs the commands it is sent, with tools as
// sandboxed WebAssembly modules.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
)

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var cfg agent.Config
	var tools, dirs listFlag
	var wire string
	flag.StringVar(&cfg.ServerURL, "server", "ws://127.0.0.1:8700/ws", "server WebSocket URL")
	flag.StringVar(&cfg.ID, "id", "", "device id, as enrolled with aipctl device enroll")
	flag.StringVar(&cfg.TokenFile, "token-file", "", "file holding the device token")
	flag.Var(&tools, "tools", "directory of tool modules, DIR or NAMESPACE=DIR (repeatable)")
	flag.Var(&dirs, "allow-dir", "host directory tools may use, HOST[:GUEST][:ro] (repeatable)")
	flag.StringVar(&cfg.DataDir, "data", "", "data directory: compile cache and agent state")
	flag.DurationVar(&cfg.HeartbeatInterval, "heartbeat", 20*time.Second, "heartbeat interval")
	flag.StringVar(&wire, "wire", "cbor", "wire encoding: cbor (edgeaip server) or json (UFO server)")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg.Logger, cfg.ToolDirs = log, tools
	if err := configure(&cfg, dirs, wire); err != nil {
		fmt.Fprintln(os.Stderr, "aip-agent:", err)
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		log.Error("aip-agent failed", "err", err)
		os.Exit(1)
	}
}

func configure(cfg *agent.Config, dirs []string, wire string) error {
	for _, d := range dirs {
		m, err := sandbox.ParseMount(d)
		if err != nil {
			return fmt.Errorf("--allow-dir: %w", err)
		}
		cfg.Mounts = append(cfg.Mounts, m)
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
