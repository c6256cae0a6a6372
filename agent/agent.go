package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
)

// Config configures an Agent.
type Config struct {
	// ID is the device id the server enrolled.
	ID string
	// ServerURL is the server's WebSocket endpoint, e.g. ws://host:8700/ws.
	ServerURL string
	// TokenFile holds the device token.
	TokenFile string
	// ToolDirs are directories of tool modules, each "DIR" or "NAMESPACE=DIR".
	ToolDirs []string
	// Mounts are the host directories granted to every tool that Policies
	// does not name (--allow-dir). A tool sees those of them its manifest
	// requests, and no other.
	Mounts []sandbox.Mount
	// AllowEnv names the host environment variables granted, like Mounts,
	// to every tool that Policies does not name (--allow-env).
	AllowEnv []string
	// Policies grant tools directories, environment variables and limits,
	// by "NAMESPACE" or "NAMESPACE.TOOL"; the most specific entry applies.
	Policies map[string]sandbox.Policy
	// TrustedKeys are the public keys tool signatures are checked against.
	TrustedKeys []ed25519.PublicKey
	// RequireSigned refuses modules that are unsigned, signed by a key not
	// in TrustedKeys, or described by a sidecar. Nil means: required as
	// soon as any key is trusted.
	RequireSigned *bool
	// DataDir holds the agent's state: the compile cache, and the tools
	// deployed to it (DATA/tools/NAMESPACE/NAME.wasm).
	DataDir string
	// Labels describe the device to operators.
	Labels map[string]string
	// HeartbeatInterval is how often a HEARTBEAT goes out. Default 20 s.
	HeartbeatInterval time.Duration
	// Wire is the encoding: CBOR (our server) or JSON (a UFO server).
	Wire protocol.Encoding
	// Conn tunes the link: frame cap and ping interval. Its Reject and
	// Logger are the agent's own.
	Conn protocol.ConnOptions
	// Limits are the default limits of a tool call.
	Limits sandbox.Limits
	// MaxConcurrentCalls bounds the tool calls that run at once; the rest
	// queue. Default GOMAXPROCS.
	MaxConcurrentCalls int
	// MaxReservedMemory bounds the memory running tool calls may reserve
	// together, in bytes. Default sandbox.DefaultMaxReservedMemory.
	MaxReservedMemory uint64
	// MaxConcurrentCommands bounds how many COMMAND messages run at once.
	// Default GOMAXPROCS.
	MaxConcurrentCommands int
	// Logger receives the agent's logs. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 20 * time.Second
	}
	if c.MaxConcurrentCommands <= 0 {
		c.MaxConcurrentCommands = runtime.GOMAXPROCS(0)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Agent is a running device agent.
type Agent struct {
	cfg      Config
	token    string
	sb       *sandbox.Sandbox
	loader   *toolLoader
	computer *Computer
	router   *Router
	log      *slog.Logger
	slots    chan struct{} // one per command allowed to run
	refused  []refusal     // modules refused at startup, reported at registration
	// inventory is signalled when the tool inventory changes, so that the
	// link registers again with the new one.
	inventory chan struct{}
}

// New loads the token and the tools. It fails on a configuration that
// cannot work, such as a missing token file; a single bad tool module is
// logged and left out instead.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	cfg.setDefaults()
	if cfg.ID == "" {
		return nil, errors.New("agent: device id is required")
	}
	if cfg.ServerURL == "" {
		return nil, errors.New("agent: server URL is required")
	}
	token, err := readToken(cfg.TokenFile)
	if err != nil {
		return nil, err
	}
	sbCfg := sandbox.NewConfig().WithLimits(cfg.Limits).
		WithMaxConcurrentCalls(cfg.MaxConcurrentCalls).
		WithMaxReservedMemory(cfg.MaxReservedMemory)
	if cfg.DataDir != "" {
		sbCfg = sbCfg.WithCacheDir(filepath.Join(cfg.DataDir, "compile-cache"))
	}
	sb, err := sandbox.New(ctx, sbCfg)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	log := cfg.Logger.With("device", cfg.ID)
	a := &Agent{
		cfg: cfg, token: token, sb: sb, log: log,
		loader:    newToolLoader(sb, cfg),
		computer:  NewComputer("default"),
		slots:     make(chan struct{}, cfg.MaxConcurrentCommands),
		inventory: make(chan struct{}, 1),
	}
	a.computer.addMeta(&installTool{agent: a})
	a.router = &Router{computer: a.computer, log: log}
	if err := a.loadTools(ctx); err != nil {
		sb.Close(ctx)
		return nil, err
	}
	return a, nil
}

func readToken(path string) (string, error) {
	if path == "" {
		return "", errors.New("agent: token file is required")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("agent: token file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("agent: token file %s is empty", path)
	}
	return token, nil
}

func newToolLoader(sb *sandbox.Sandbox, cfg Config) *toolLoader {
	keys := signature.NewKeyRing(cfg.TrustedKeys...)
	require := keys.Len() > 0
	if cfg.RequireSigned != nil {
		require = *cfg.RequireSigned
	}
	return &toolLoader{
		sb:        sb,
		verifier:  signature.Verifier{Keys: keys, RequireSigned: require},
		policies:  sandbox.Policies{Default: sandbox.Policy{Dirs: cfg.Mounts, Env: cfg.AllowEnv}, ByName: cfg.Policies},
		lookupEnv: os.LookupEnv,
	}
}

// loadTools loads the tool dirs, then the tools deployed to this device.
// A module that is refused is logged and reported at registration; the
// agent runs with the rest. Two tool dirs that offer the same tool are a
// configuration error; a deployed tool that clashes with them is refused.
func (a *Agent) loadTools(ctx context.Context) error {
	for _, spec := range a.cfg.ToolDirs {
		dir := parseToolDir(spec)
		tools, err := a.loadDir(ctx, dir)
		if err != nil {
			return err
		}
		if err := a.computer.add(tools...); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	deployed, err := a.deployedDirs()
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	for _, dir := range deployed {
		tools, err := a.loadDir(ctx, dir)
		if err != nil {
			return err
		}
		for _, t := range tools {
			if err := a.computer.add(t); err != nil {
				a.refuse(refusal{Path: filepath.Join(dir.Path, t.info().ToolName+".wasm"), Error: err.Error()})
				t.(*wasmTool).close(ctx)
			}
		}
	}
	return nil
}

// loadDir loads the modules of dir, refusing those that fail.
func (a *Agent) loadDir(ctx context.Context, dir toolDir) ([]tool, error) {
	tools, refused, err := a.loader.loadDir(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	for _, r := range refused {
		a.refuse(r)
	}
	a.log.Info("tools loaded", "namespace", dir.Namespace, "dir", dir.Path, "count", len(tools), "refused", len(refused))
	return tools, nil
}

// refuse logs a module that was not loaded and keeps it for registration.
func (a *Agent) refuse(r refusal) {
	a.log.Error("tool refused", "path", r.Path, "err", r.Error)
	a.refused = append(a.refused, r)
}

// Computer is the agent's tool registry.
func (a *Agent) Computer() *Computer { return a.computer }

// Close frees the sandbox. Call it after Run returns.
func (a *Agent) Close(ctx context.Context) error { return a.sb.Close(ctx) }
