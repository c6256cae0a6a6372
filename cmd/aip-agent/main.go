// Command aip-agent is the edgeaip device agent. It dials out to the server,
// registers the device and runs the commands it is sent, with tools as
// sandboxed WebAssembly modules and proxied MCP servers.
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

// defaultServer is the server URL when neither the config file nor a flag
// gives one.
const defaultServer = "ws://127.0.0.1:8700/ws"

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// flags are the command line; each one set overrides the config file.
type flags struct {
	config, server, id, tokenFile, data, wire string
	tools, dirs                               listFlag
	heartbeat                                 time.Duration
}

func main() {
	var f flags
	flag.StringVar(&f.config, "config", "", "agent config file (YAML); flags override it")
	flag.StringVar(&f.server, "server", defaultServer, "server WebSocket URL")
	flag.StringVar(&f.id, "id", "", "device id, as enrolled with aipctl device enroll")
	flag.StringVar(&f.tokenFile, "token-file", "", "file holding the device token")
	flag.Var(&f.tools, "tools", "directory of tool modules, DIR or NAMESPACE=DIR (repeatable)")
	flag.Var(&f.dirs, "allow-dir", "host directory tools may use, HOST[:GUEST][:ro] (repeatable)")
	flag.StringVar(&f.data, "data", "", "data directory: outbox and compile cache")
	flag.DurationVar(&f.heartbeat, "heartbeat", 20*time.Second, "heartbeat interval")
	flag.StringVar(&f.wire, "wire", "cbor", "wire encoding: cbor (edgeaip server) or json (UFO server)")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cfg, err := configure(f, setFlags())
	if err != nil {
		fmt.Fprintln(os.Stderr, "aip-agent:", err)
		os.Exit(2)
	}
	cfg.Logger = log
	if err := run(cfg); err != nil {
		log.Error("aip-agent failed", "err", err)
		os.Exit(1)
	}
}

// setFlags names the flags given on the command line.
func setFlags() map[string]bool {
	set := map[string]bool{}
	flag.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	return set
}

// configure reads the config file, if any, and lays the flags that were
// set over it.
func configure(f flags, set map[string]bool) (agent.Config, error) {
	var cfg agent.Config
	if f.config != "" {
		var err error
		if cfg, err = agent.LoadConfig(f.config); err != nil {
			return cfg, err
		}
	}
	override := func(name string, apply func()) {
		if set[name] || f.config == "" {
			apply()
		}
	}
	override("server", func() { cfg.ServerURL = f.server })
	override("id", func() { cfg.ID = f.id })
	override("token-file", func() { cfg.TokenFile = f.tokenFile })
	override("data", func() { cfg.DataDir = f.data })
	override("heartbeat", func() { cfg.HeartbeatInterval = f.heartbeat })
	override("tools", func() { cfg.ToolDirs = f.tools })
	var err error
	override("allow-dir", func() { cfg.Mounts, err = parseMounts(f.dirs) })
	if err != nil {
		return cfg, err
	}
	override("wire", func() { cfg.Wire, err = parseWire(f.wire) })
	if cfg.ServerURL == "" {
		cfg.ServerURL = defaultServer
	}
	return cfg, err
}

func parseMounts(specs []string) ([]sandbox.Mount, error) {
	var out []sandbox.Mount
	for _, d := range specs {
		m, err := sandbox.ParseMount(d)
		if err != nil {
			return nil, fmt.Errorf("--allow-dir: %w", err)
		}
		out = append(out, m)
	}
	return out, nil
}

func parseWire(wire string) (protocol.Encoding, error) {
	switch wire {
	case "cbor":
		return protocol.CBOR, nil
	case "json":
		return protocol.JSON, nil
	}
	return protocol.CBOR, fmt.Errorf("--wire: want cbor or json, got %q", wire)
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
	return a.Run(ctx)
}
