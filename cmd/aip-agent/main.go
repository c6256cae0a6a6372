// Command aip-agent is the edgeaip device agent. It dials out to the server,
// registers the device and runs the commands it is sent, with tools as
// sandboxed WebAssembly modules and proxied MCP servers.
package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
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

// defaultServer is the server URL when neither the config file nor a flag
// gives one.
const defaultServer = "ws://127.0.0.1:8700/ws"

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// flags are the command line; each one set overrides the config file.
type flags struct {
	config, server, id, tokenFile, data, wire, reserve string
	tools, dirs, keys, env                             listFlag
	heartbeat                                          time.Duration
	requireSigned                                      bool
	maxCalls                                           int
}

func main() {
	var f flags
	flag.StringVar(&f.config, "config", "", "agent config file (YAML); flags override it")
	flag.StringVar(&f.server, "server", defaultServer, "server WebSocket URL")
	flag.StringVar(&f.id, "id", "", "device id, as enrolled with aipctl device enroll")
	flag.StringVar(&f.tokenFile, "token-file", "", "file holding the device token")
	flag.Var(&f.tools, "tools", "directory of tool modules, DIR or NAMESPACE=DIR (repeatable)")
	flag.Var(&f.dirs, "allow-dir", "host directory tools may use, HOST[:GUEST][:ro] (repeatable)")
	flag.StringVar(&f.data, "data", "", "data directory: outbox, compile cache and deployed tools")
	flag.DurationVar(&f.heartbeat, "heartbeat", 20*time.Second, "heartbeat interval")
	flag.StringVar(&f.wire, "wire", "cbor", "wire encoding: cbor (edgeaip server) or json (UFO server)")
	flag.Var(&f.keys, "trusted-key", "PEM public key file tool signatures are checked against (repeatable)")
	flag.BoolVar(&f.requireSigned, "require-signed", false, "refuse unsigned tool modules (default: true once a --trusted-key is given)")
	flag.Var(&f.env, "allow-env", "environment variable tools may read, if their manifest asks (repeatable)")
	flag.IntVar(&f.maxCalls, "max-calls", 0, "tool calls that run at once; the rest queue (default GOMAXPROCS)")
	flag.StringVar(&f.reserve, "max-call-memory", "", "memory running tool calls may reserve together, e.g. 256MiB (default 256MiB)")
	var logOpts logging.Options
	logOpts.RegisterFlags(flag.CommandLine)
	flag.Parse()

	log := logOpts.New(os.Stderr)
	cfg, err := configure(f, setFlags())
	if err != nil {
		fmt.Fprintln(os.Stderr, "aip-agent:", err)
		os.Exit(2)
	}
	cfg.Logger = log
	applyMemoryLimit(cfg.MemoryLimit)
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
// set over it. Without a file every flag applies, defaults included.
func configure(f flags, set map[string]bool) (agent.Config, error) {
	var cfg agent.Config
	if f.config != "" {
		var err error
		if cfg, err = agent.LoadConfig(f.config); err != nil {
			return cfg, err
		}
	}
	var errs []error
	override := func(name string, apply func() error) {
		if set[name] || (f.config == "" && name != "require-signed") {
			if err := apply(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	override("server", func() error { cfg.ServerURL = f.server; return nil })
	override("id", func() error { cfg.ID = f.id; return nil })
	override("token-file", func() error { cfg.TokenFile = f.tokenFile; return nil })
	override("data", func() error { cfg.DataDir = f.data; return nil })
	override("heartbeat", func() error { cfg.HeartbeatInterval = f.heartbeat; return nil })
	override("tools", func() error { cfg.ToolDirs = f.tools; return nil })
	override("allow-env", func() error { cfg.AllowEnv = f.env; return nil })
	override("max-calls", func() error { cfg.MaxConcurrentCalls = f.maxCalls; return nil })
	override("require-signed", func() error { cfg.RequireSigned = &f.requireSigned; return nil })
	override("allow-dir", func() (err error) { cfg.Mounts, err = parseMounts(f.dirs); return err })
	override("trusted-key", func() (err error) { cfg.TrustedKeys, err = loadKeys(f.keys); return err })
	override("max-call-memory", func() (err error) { cfg.MaxReservedMemory, err = parseReserve(f.reserve); return err })
	override("wire", func() (err error) { cfg.Wire, err = parseWire(f.wire); return err })
	if cfg.ServerURL == "" {
		cfg.ServerURL = defaultServer
	}
	return cfg, errors.Join(append(errs, missingKeys(f.config, cfg)...)...)
}

// missingKeys names each setting the agent cannot run without that neither
// the config file nor a flag gave: as the file's key when there is a file.
func missingKeys(file string, cfg agent.Config) []error {
	var errs []error
	for _, k := range []struct {
		key, flag string
		set       bool
	}{
		{"device.id", "--id", cfg.ID != ""},
		{"server.token_file", "--token-file", cfg.TokenFile != ""},
		{"data_dir", "--data", cfg.DataDir != ""},
	} {
		switch {
		case k.set:
		case file != "":
			errs = append(errs, fmt.Errorf("%s: %s: missing (or %s)", file, k.key, k.flag))
		default:
			errs = append(errs, fmt.Errorf("%s: missing (or %s in a --config file)", k.flag, k.key))
		}
	}
	return errs
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

func loadKeys(files []string) ([]ed25519.PublicKey, error) {
	var out []ed25519.PublicKey
	for _, k := range files {
		pub, err := signature.LoadPublicKey(k)
		if err != nil {
			return nil, fmt.Errorf("--trusted-key: %w", err)
		}
		out = append(out, pub)
	}
	return out, nil
}

func parseReserve(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := manifest.ParseByteSize(s)
	if err != nil {
		return 0, fmt.Errorf("--max-call-memory: %w", err)
	}
	return uint64(n), nil
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

// applyMemoryLimit sets the Go heap's soft limit from the config, unless
// the GOMEMLIMIT environment variable already did.
func applyMemoryLimit(limit int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if limit <= 0 {
		limit = agent.DefaultMemoryLimit
	}
	debug.SetMemoryLimit(limit)
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
	// Loading tools can instrument them, which leaves tens of megabytes
	// of garbage; hand it back to the board before settling down.
	debug.FreeOSMemory()
	return a.Run(ctx)
}
