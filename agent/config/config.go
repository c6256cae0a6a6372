// Package config is the agent's configuration: one [Config], read from
// a YAML file by [Load] and from the command line by [Flags], both
// through one parser, and laid one over the other by [Config.Merge]:
// defaults, then the file, then the flags that were given.
// agent.example.yaml, beside the agent package, documents every field.
package config

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
)

// Config configures an agent. Load reads one from a YAML file, Flags
// from the command line.
type Config struct {
	// ID is the device id the server enrolled.
	ID string
	// ServerURL is the server's WebSocket endpoint, e.g. ws://host:8700/ws.
	ServerURL string
	// ServerURLs, instead, are the endpoints of several servers: the
	// nodes of a cluster. The agent tries them in an order of its own,
	// stays on one while it holds and moves to the next when it fails
	// (agent/RATIONALE.md, "Several servers").
	// Servers gives whichever is set; a config that sets both is refused.
	ServerURLs []string
	// Resolver looks up the servers' host names, each of whose addresses
	// the agent tries in turn. Nil: the system's resolver.
	Resolver *net.Resolver
	// TokenFile holds the device token. It may be left out when CertFile
	// names the device. A token the server rotates is written into it, or,
	// if the agent may not write it, into the data dir (see
	// agent/internal/token).
	TokenFile string
	// CAFile holds the CAs a wss:// server's certificate is verified
	// against; empty: the system's roots.
	CAFile string
	// CertFile and KeyFile are the device's certificate and its key,
	// presented to a wss:// server. A certificate that names the device
	// (protocol.DeviceCertName) stands in for the token. Both are read
	// again at each connection, so a renewed certificate needs no restart.
	CertFile, KeyFile string
	// Labels describe the device to operators.
	Labels map[string]string
	// DataDir holds the agent's state: the outbox, the compile cache, and
	// the tools deployed to it (DATA/tools/NAMESPACE/NAME.wasm).
	DataDir string
	// CompileCacheDir, if set, keeps instrumented and compiled modules
	// instead of DATA/compile-cache. Several agents on one host may share
	// it, so the agent never prunes it; DATA/compile-cache is the agent's
	// alone, and at start and after each deploy the agent removes from it
	// what it has reason to (sandbox.Sandbox.PruneCache): the modules
	// whose files are gone, and what is past CompileCacheLimits.
	CompileCacheDir string
	// CompileCacheLimits bound the agent's own compile cache.
	CompileCacheLimits CacheLimits

	// HeartbeatInterval is how often a HEARTBEAT goes out. Default none
	// on CBOR, our server's wire, where the link's WebSocket pings are the
	// one liveness exchange and keep the device's last_seen; 20 s on JSON,
	// for UFO's servers, which expect heartbeats.
	HeartbeatInterval time.Duration
	// Wire is the encoding: CBOR (our server) or JSON (a UFO server).
	Wire protocol.Encoding
	// wireSet says Wire was given, as CBOR may be: its zero value.
	wireSet bool
	// Conn tunes the link: frame cap and ping interval. The agent pings a
	// link it has heard nothing on for the ping interval, 50 s by default
	// and at most, and drops it when a fifth of that more passes without
	// an answer: a dead link is noticed within 60 s. Its Reject and
	// Logger are the agent's own.
	Conn protocol.ConnOptions

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
	// ReleaseKeys are the public keys agent releases are checked against,
	// apart from TrustedKeys: a key that may sign a tool need not be one
	// that may replace the agent. With one, the agent updates itself
	// (agent/internal/selfupdate).
	ReleaseKeys []ed25519.PublicKey
	// Supervised is what the supervisor that started this agent said it
	// is: a release's SHA-256, or "flashed"; empty when no supervisor
	// started it (aip-agent reads it from AIP_AGENT_SUPERVISED).
	Supervised string
	// RequireSigned refuses modules that are unsigned, signed by a key not
	// in TrustedKeys, or described by a sidecar. Nil means: required as
	// soon as any key is trusted.
	RequireSigned *bool
	// Limits are the default limits of a tool call.
	Limits sandbox.Limits
	// MaxConcurrentCalls bounds the tool calls that run at once; the rest
	// queue. Default GOMAXPROCS.
	MaxConcurrentCalls int
	// MaxReservedMemory bounds the memory running tool calls may reserve
	// together, in bytes. Default sandbox.DefaultMaxReservedMemory.
	MaxReservedMemory uint64
	// UnloadAfter is how long a tool's compiled code stays in memory after
	// its last call. Default sandbox.DefaultUnloadAfter; negative: never.
	UnloadAfter time.Duration
	// PrepareBeforeRegister bounds how long the agent prepares its small
	// tools (at most 256 KiB, as the stock tools are) before it first
	// registers, so that their first calls find them ready. Default 2 s;
	// negative: none, every tool is prepared behind calls.
	PrepareBeforeRegister time.Duration
	// Reproducible gives tools fake clocks and a fixed random sequence, so
	// that a call's fuel is the same on every device (sandbox.Config.
	// WithReproducible).
	Reproducible bool

	// MCP lists the MCP servers to proxy, in the shape of UFO's mcp.yaml.
	MCP MCPConfig
	// MCPServe is the agent's own MCP endpoint, which serves its tools to
	// applications on the device. Off unless Listen is set.
	MCPServe MCPServe

	// MaxConcurrentCommands bounds how many COMMAND messages run at once.
	// Default 4 × GOMAXPROCS: a command waits on the disk and on MCP
	// servers as well as on its wasm calls, which MaxConcurrentCalls
	// bounds.
	MaxConcurrentCommands int
	// ShutdownGrace is how long commands in flight get to finish when the
	// agent stops, before they are canceled. Default 10 s.
	ShutdownGrace time.Duration
	// Outbox bounds the results the agent keeps on disk.
	Outbox OutboxLimits

	// MemoryLimit is the soft limit of the agent's Go heap, as GOMEMLIMIT
	// sets it; the main program applies it unless GOMEMLIMIT is set.
	// Default DefaultMemoryLimit. Tool memory and compiled code are outside
	// it: MaxReservedMemory bounds the former.
	MemoryLimit int64
	// GCPercent is the Go collector's target, as GOGC sets it; the main
	// program applies it unless GOGC is set. Default DefaultGCPercent.
	GCPercent int

	// Logger receives the agent's logs. Default slog.Default().
	Logger *slog.Logger
}

// MCPServe configures the agent's own MCP endpoint (Streamable HTTP at
// /mcp), for applications on the device: a kiosk's own assistant, or any
// MCP client through aip-agent mcp-stdio.
type MCPServe struct {
	// Listen is HOST:PORT. A loopback address keeps the endpoint to the
	// device; any other is the operator's explicit choice.
	Listen string
	// TokenFile holds the token a client presents as a Bearer token.
	// Default DATA/mcp-serve.token; the agent makes it (mode 0600) if it
	// is missing.
	TokenFile string
	// MaxSessions bounds the sessions the endpoint holds: past it a new
	// one takes the place of the oldest idle one, or is refused with 429
	// if all are busy. Default mcpserve.DefaultMaxSessions.
	MaxSessions int
}

// MCPServeTokenFile is the token file of the MCP endpoint when the
// config names none, in the data dir.
const MCPServeTokenFile = "mcp-serve.token"

// DefaultMemoryLimit is the agent's default GOMEMLIMIT.
const DefaultMemoryLimit = 64 << 20

// DefaultGCPercent is the agent's default GOGC: half Go's, so that the
// heap grows by half its live size between collections, not by all of
// it. On a fresh data dir with the stock tools, the agent's peak over its
// first minute is then 31 MiB rather than 35-51 MiB (BENCHMARKS.md, issue
// 38), for a little more collector time on a device that is mostly idle.
const DefaultGCPercent = 50

// DefaultServerURL is the server's URL when neither the config file nor
// a flag gives one.
const DefaultServerURL = "ws://127.0.0.1:8700/ws"

// Default is what the agent assumes before the file and the flags.
func Default() Config { return Config{ServerURL: DefaultServerURL} }

// Servers are the server URLs the agent links to: ServerURLs, or else
// ServerURL.
func (c *Config) Servers() []string {
	if len(c.ServerURLs) > 0 {
		return c.ServerURLs
	}
	if c.ServerURL == "" {
		return nil
	}
	return []string{c.ServerURL}
}

// OutboxLimits bound the outbox. Results older than MaxAge are dropped, and
// once the outbox grows past MaxBytes the oldest give way to tombstones,
// delivered ones first (agent/RATIONALE.md, "Bounds").
type OutboxLimits struct {
	MaxBytes int64         // default 16 MiB, or 4 frames if larger; at least one frame
	MaxAge   time.Duration // default 7 days; at least 24 h
}

// CacheLimits bound the agent's own compile cache (never a shared one).
// A module no tool has loaded for longer than MaxAge leaves it, and while
// it holds more than MaxBytes, so do the modules no tool has loaded now,
// the least recently loaded first. A stock tool in C takes some 340 KB
// there, instrumented and compiled; a Go tool some 20 MB.
type CacheLimits struct {
	MaxBytes int64         // default 256 MiB
	MaxAge   time.Duration // default 30 days
}

// MCPConfig is UFO's mcp.yaml: agent_name → root_name → the MCP servers of
// that root. A command reaches the Computer of its agent_name and
// root_name, or of the agent's "default" root when its root has no entry.
type MCPConfig map[string]map[string]MCPRoot

// MCPRoot lists the MCP servers of one root. Their tools are registered
// with the tool type of the list they are in.
type MCPRoot struct {
	DataCollection []MCPServerConfig
	Action         []MCPServerConfig
}

// The types of MCP server.
const (
	MCPStdio = "stdio" // a subprocess the agent spawns, speaking on stdin/stdout
	MCPHTTP  = "http"  // a streamable HTTP endpoint
)

// MCPServerConfig is one MCP server. The same namespace may appear under
// several roots; it is then one server, shared, unless Reset is set.
type MCPServerConfig struct {
	Namespace string
	Type      string // MCPStdio or MCPHTTP
	// Command, StartArgs, Env and Cwd start a stdio server. It inherits
	// only a few variables of the agent's environment (PATH, HOME, LANG,
	// TZ, DISPLAY, ...); Env adds to them.
	Command   string
	StartArgs []string
	Env       map[string]string
	Cwd       string
	// URL is an HTTP server's endpoint.
	URL string
	// Reset gives each Computer its own instance of the server, started
	// fresh for it, as UFO resets such servers for each new Computer.
	Reset bool
	// Timeout bounds each tool call. Default 60 s.
	Timeout time.Duration
}

// defaultMCPCallTimeout is MCPServerConfig.Timeout's default.
const defaultMCPCallTimeout = 60 * time.Second

// Bounds of the config. Beyond them the agent cannot keep its promises.
const (
	// maxPingInterval: a dead link is noticed within the ping interval
	// and a fifth of it more, which must stay within the 60 s in which a
	// dead link is to be found.
	maxPingInterval = 50 * time.Second
	// minOutboxAge: results, and their tombstones, must outlive every copy
	// of their command the server may send, and the server sends a pending
	// command again until its timeout, which is up to 24 h for a plan step.
	minOutboxAge = 24 * time.Hour
)

// validDeviceID is what device ids may look like; the server enrolls no
// other, and the agent names its outbox after it.
var validDeviceID = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$`)

// SetDefaults fills in what c leaves unset.
func (c *Config) SetDefaults() {
	if c.HeartbeatInterval <= 0 && c.Wire == protocol.JSON {
		c.HeartbeatInterval = 20 * time.Second
	}
	if c.MaxConcurrentCommands <= 0 {
		c.MaxConcurrentCommands = 4 * runtime.GOMAXPROCS(0)
	}
	if c.PrepareBeforeRegister == 0 {
		c.PrepareBeforeRegister = 2 * time.Second
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 10 * time.Second
	}
	if c.Conn.PingInterval == 0 {
		c.Conn.PingInterval = protocol.DefaultPingInterval
	}
	if c.Conn.MaxFrameBytes <= 0 {
		c.Conn.MaxFrameBytes = protocol.DefaultMaxFrameBytes
	}
	if c.Outbox.MaxBytes <= 0 {
		c.Outbox.MaxBytes = max(16<<20, 4*c.Conn.MaxFrameBytes)
	}
	if c.Outbox.MaxAge <= 0 {
		c.Outbox.MaxAge = 7 * 24 * time.Hour
	}
	if c.CompileCacheLimits.MaxBytes <= 0 {
		c.CompileCacheLimits.MaxBytes = 256 << 20
	}
	if c.CompileCacheLimits.MaxAge <= 0 {
		c.CompileCacheLimits.MaxAge = 30 * 24 * time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MCPServe.Listen != "" && c.MCPServe.TokenFile == "" && c.DataDir != "" {
		c.MCPServe.TokenFile = filepath.Join(c.DataDir, MCPServeTokenFile)
	}
	for _, roots := range c.MCP {
		for _, root := range roots {
			for _, list := range [][]MCPServerConfig{root.DataCollection, root.Action} {
				for i := range list {
					if list[i].Timeout <= 0 {
						list[i].Timeout = defaultMCPCallTimeout
					}
				}
			}
		}
	}
}

// Check refuses a Config the agent cannot honour.
func (c *Config) Check() error {
	switch {
	case c.ID == "":
		return errors.New("device id is required")
	case !validDeviceID.MatchString(c.ID):
		return fmt.Errorf("device id %q: want 1-64 of [A-Za-z0-9._-], not starting with '.'", c.ID)
	case len(c.Servers()) == 0:
		return errors.New("server URL is required")
	case c.ServerURL != "" && len(c.ServerURLs) > 0:
		return errors.New("give the server URL or the server URLs, not both")
	case c.DataDir == "":
		return errors.New("data dir is required: the agent keeps its outbox there")
	}
	seen := map[string]bool{}
	for _, u := range c.Servers() {
		if err := checkServerURL(u); err != nil {
			return fmt.Errorf("server URL %w", err)
		}
		if seen[u] {
			// It would be dialled twice a round: a dead one twice as long.
			return fmt.Errorf("server URL %q: given twice", protocol.RedactURL(u))
		}
		seen[u] = true
		if err := checkTLS(u, c.CAFile, c.CertFile, c.KeyFile); err != nil {
			return err
		}
	}
	if c.TokenFile == "" && c.CertFile == "" {
		return errors.New("a token file or a device certificate is required")
	}
	if err := checkPing(c.Conn.PingInterval); err != nil {
		return fmt.Errorf("ping interval %w", err)
	}
	if err := checkOutboxAge(c.Outbox.MaxAge); err != nil {
		return fmt.Errorf("outbox max age %w", err)
	}
	if err := checkOutboxBytes(c.Outbox.MaxBytes, c.Conn.MaxFrameBytes); err != nil {
		return fmt.Errorf("outbox max bytes %w", err)
	}
	if err := checkMCPListen(c.MCPServe.Listen); err != nil {
		return fmt.Errorf("mcp_serve.listen %w", err)
	}
	return c.MCP.check()
}

// checkMCPListen refuses an address the MCP endpoint could not listen on,
// and one without a host: listening on every interface must be asked for
// by naming one (0.0.0.0), not by leaving the host out.
func checkMCPListen(addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	switch {
	case err != nil:
		return fmt.Errorf("%q: want HOST:PORT, such as 127.0.0.1:8931: %w", addr, err)
	case host == "":
		return fmt.Errorf("%q: give the host: 127.0.0.1 for applications on the device only, or the address of another interface", addr)
	case port == "":
		return fmt.Errorf("%q: give the port", addr)
	}
	return nil
}

// checkServerURL refuses a server URL the agent could never dial.
func checkServerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Hostname() == "" {
		return fmt.Errorf("%q: want ws://HOST/PATH or wss://HOST/PATH", protocol.RedactURL(s))
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: port %s: want 1-65535", protocol.RedactURL(s), p)
		}
	}
	return nil
}

// checkTLS refuses TLS files the agent could not use: a certificate
// without its key, or either, or a CA, for a server that speaks no TLS.
func checkTLS(serverURL, ca, cert, key string) error {
	if (cert == "") != (key == "") {
		return errors.New("the device certificate and its key go together: give both or neither")
	}
	if (ca != "" || cert != "") && !strings.HasPrefix(serverURL, "wss://") {
		return fmt.Errorf("server URL %q: a CA or a device certificate needs a wss:// URL", protocol.RedactURL(serverURL))
	}
	return nil
}

func checkPing(d time.Duration) error {
	if d > maxPingInterval {
		return fmt.Errorf("%s: at most %s, so that a dead link is noticed within 60s", d, maxPingInterval)
	}
	return nil
}

func checkOutboxAge(d time.Duration) error {
	if d < minOutboxAge {
		return fmt.Errorf("%s: at least 24h, as long as the server may send a command again", d)
	}
	return nil
}

// checkOutboxBytes refuses an outbox that could not hold one result of
// the largest size the link carries.
func checkOutboxBytes(n, frame int64) error {
	if n < frame {
		return fmt.Errorf("%d bytes: at least the frame cap, %d bytes", n, frame)
	}
	return nil
}

// Namespaces lists the namespaces of the MCP servers.
func (m MCPConfig) Namespaces() map[string]bool {
	out := map[string]bool{}
	for _, roots := range m {
		for _, root := range roots {
			for _, s := range append(append([]MCPServerConfig{}, root.DataCollection...), root.Action...) {
				out[s.Namespace] = true
			}
		}
	}
	return out
}

// check refuses a namespace defined twice with different settings, and an
// incomplete server.
func (m MCPConfig) check() error {
	seen := map[string]MCPServerConfig{}
	for _, agentName := range sortedKeys(m) {
		for _, rootName := range sortedKeys(m[agentName]) {
			root := m[agentName][rootName]
			for _, s := range append(append([]MCPServerConfig{}, root.DataCollection...), root.Action...) {
				where := fmt.Sprintf("mcp server %q (agent %q, root %q)", s.Namespace, agentName, rootName)
				if err := s.check(); err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				if prev, ok := seen[s.Namespace]; ok && !sameServer(prev, s) {
					return fmt.Errorf("%s: namespace is defined elsewhere with other settings", where)
				}
				seen[s.Namespace] = s
			}
		}
	}
	return nil
}

func (s MCPServerConfig) check() error {
	switch {
	case s.Namespace == "":
		return errors.New("namespace is required")
	case s.Type == MCPStdio && s.Command == "":
		return errors.New("command is required for a stdio server")
	case s.Type == MCPStdio && s.URL != "":
		return errors.New("url is for http servers; a stdio server has a command")
	case s.Type == MCPHTTP && s.URL == "":
		return errors.New("url is required for an http server")
	case s.Type == MCPHTTP && (s.Command != "" || len(s.StartArgs) > 0 || len(s.Env) > 0 || s.Cwd != ""):
		return errors.New("command, start_args, env and cwd are for stdio servers; an http server has a url")
	case s.Type != MCPStdio && s.Type != MCPHTTP:
		return fmt.Errorf("type %q: want stdio or http", s.Type)
	}
	return nil
}

func sameServer(a, b MCPServerConfig) bool { return reflect.DeepEqual(a, b) }

func sortedKeys[M ~map[string]V, V any](m M) []string { return slices.Sorted(maps.Keys(m)) }
