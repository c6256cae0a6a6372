package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
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
	// Mounts are the host directories tools may see.
	Mounts []sandbox.Mount
	// DataDir holds the agent's state, such as the compile cache.
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
	computer *Computer
	router   *Router
	log      *slog.Logger
	slots    chan struct{} // one per command allowed to run
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
	sbCfg := sandbox.NewConfig().WithLimits(cfg.Limits).WithMounts(cfg.Mounts...)
	if cfg.DataDir != "" {
		sbCfg = sbCfg.WithCacheDir(cfg.DataDir + "/compile-cache")
	}
	sb, err := sandbox.New(ctx, sbCfg)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	log := cfg.Logger.With("device", cfg.ID)
	a := &Agent{
		cfg: cfg, token: token, sb: sb, log: log,
		computer: NewComputer("default"),
		slots:    make(chan struct{}, cfg.MaxConcurrentCommands),
	}
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

func (a *Agent) loadTools(ctx context.Context) error {
	for _, spec := range a.cfg.ToolDirs {
		dir := parseToolDir(spec)
		tools, err := loadToolDir(ctx, a.sb, dir, a.log)
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		if err := a.computer.add(tools...); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		a.log.Info("tools loaded", "namespace", dir.Namespace, "dir", dir.Path, "count", len(tools))
	}
	return nil
}

// Computer is the agent's tool registry.
func (a *Agent) Computer() *Computer { return a.computer }

// Close frees the sandbox. Call it after Run returns.
func (a *Agent) Close(ctx context.Context) error { return a.sb.Close(ctx) }
