package config

import (
	"bytes"
	"cmp"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/internal/tlsfiles"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
	"gopkg.in/yaml.v3"
)

// Load reads the agent's YAML config file; agent.example.yaml documents
// every field. Relative paths in it are taken relative to the file's
// directory. A config that cannot work fails here, each problem named
// with its line: "agent.yaml:12: mcp.default.default.action[0].type: want
// stdio or http, got "local"".
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	l := &loader{file: path, dir: filepath.Dir(path)}
	l.locate = l.line
	if err := yaml.Unmarshal(data, &l.doc); err != nil {
		return Config{}, l.yamlError(err)
	}
	var fc fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, l.yamlError(err)
	}
	cfg := l.config(&fc)
	return cfg, errors.Join(l.errs...)
}

// fileConfig is the config file's shape.
type fileConfig struct {
	Device struct {
		ID     string            `yaml:"id"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"device"`
	Server struct {
		URL       string   `yaml:"url"`
		URLs      []string `yaml:"urls"`
		TokenFile string   `yaml:"token_file"`
		CA        string   `yaml:"ca"`
		Cert      string   `yaml:"cert"`
		Key       string   `yaml:"key"`
		Wire      string   `yaml:"wire"`
		Heartbeat duration `yaml:"heartbeat"`
		Ping      duration `yaml:"ping"`
		MaxFrame  byteSize `yaml:"max_frame"`
	} `yaml:"server"`
	DataDir      string `yaml:"data_dir"`
	CompileCache string `yaml:"compile_cache"`
	CacheLimits  struct {
		MaxBytes byteSize `yaml:"max_bytes"`
		MaxAge   duration `yaml:"max_age"`
	} `yaml:"compile_cache_limits"`
	MemoryLimit byteSize `yaml:"memory_limit"`
	GCPercent   int      `yaml:"gc_percent"`
	Commands    struct {
		MaxConcurrent int      `yaml:"max_concurrent"`
		ShutdownGrace duration `yaml:"shutdown_grace"`
	} `yaml:"commands"`
	Outbox struct {
		MaxBytes byteSize `yaml:"max_bytes"`
		MaxAge   duration `yaml:"max_age"`
	} `yaml:"outbox"`
	Tools struct {
		Dirs          []string              `yaml:"dirs"`
		AllowDirs     []string              `yaml:"allow_dirs"`
		AllowEnv      []string              `yaml:"allow_env"`
		Limits        fileLimits            `yaml:"limits"`
		TrustedKeys   []string              `yaml:"trusted_keys"`
		RequireSigned *bool                 `yaml:"require_signed"`
		Policies      map[string]filePolicy `yaml:"policies"`
		MaxCalls      int                   `yaml:"max_calls"`
		MaxCallMemory byteSize              `yaml:"max_call_memory"`
		UnloadAfter   duration              `yaml:"unload_after"`
		PrepareBefore duration              `yaml:"prepare_before_register"`
		Reproducible  bool                  `yaml:"reproducible"`
	} `yaml:"tools"`
	Updates struct {
		ReleaseKeys []string `yaml:"release_keys"`
	} `yaml:"updates"`
	MCP      map[string]map[string]fileMCPRoot `yaml:"mcp"`
	MCPServe struct {
		Listen      string `yaml:"listen"`
		TokenFile   string `yaml:"token_file"`
		MaxSessions int    `yaml:"max_sessions"`
	} `yaml:"mcp_serve"`
}

type fileLimits struct {
	Timeout duration `yaml:"timeout"`
	Memory  byteSize `yaml:"memory"`
	Stdout  byteSize `yaml:"stdout"`
	Stderr  byteSize `yaml:"stderr"`
	Fuel    uint64   `yaml:"fuel"`
}

type filePolicy struct {
	Dirs   []string   `yaml:"dirs"`
	Env    []string   `yaml:"env"`
	Limits fileLimits `yaml:"limits"`
}

type fileMCPRoot struct {
	DataCollection []fileMCPServer `yaml:"data_collection"`
	Action         []fileMCPServer `yaml:"action"`
}

type fileMCPServer struct {
	Namespace string            `yaml:"namespace"`
	Type      string            `yaml:"type"`
	Command   string            `yaml:"command"`
	StartArgs []string          `yaml:"start_args"`
	Env       map[string]string `yaml:"env"`
	Cwd       string            `yaml:"cwd"`
	URL       string            `yaml:"url"`
	Reset     bool              `yaml:"reset"`
	Timeout   duration          `yaml:"timeout"`
}

// loader turns a fileConfig, read from the file or set by the flags, into
// a Config, collecting every problem with where it was given.
type loader struct {
	file string    // the config file; empty for the flags
	dir  string    // relative paths are taken relative to it; empty: as given
	doc  yaml.Node // the file, for the lines of its values
	// locate names where the value at path was given: the file's line
	// and key, or the flag.
	locate func(path []any) string
	errs   []error
}

// fail records a problem with the value at path: map keys and list
// indexes from the document's root.
func (l *loader) fail(path []any, format string, args ...any) {
	l.errs = append(l.errs, fmt.Errorf("%s: %s", l.locate(path), fmt.Sprintf(format, args...)))
}

// line locates a value of the file: file:line: key.
func (l *loader) line(path []any) string {
	return fmt.Sprintf("%s:%d: %s", l.file, lineOf(&l.doc, path), dotted(path))
}

// abs resolves a path of the file against the file's directory.
func (l *loader) abs(p string) string {
	if p == "" || l.dir == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(l.dir, p)
}

func (l *loader) config(fc *fileConfig) Config {
	cfg := Config{
		ID:                    fc.Device.ID,
		Labels:                fc.Device.Labels,
		ServerURL:             fc.Server.URL,
		TokenFile:             l.abs(fc.Server.TokenFile),
		CAFile:                l.abs(fc.Server.CA),
		CertFile:              l.abs(fc.Server.Cert),
		KeyFile:               l.abs(fc.Server.Key),
		HeartbeatInterval:     time.Duration(fc.Server.Heartbeat),
		Conn:                  protocol.ConnOptions{PingInterval: time.Duration(fc.Server.Ping), MaxFrameBytes: int64(fc.Server.MaxFrame)},
		DataDir:               l.abs(fc.DataDir),
		CompileCacheDir:       l.abs(fc.CompileCache),
		CompileCacheLimits:    CacheLimits{MaxBytes: int64(fc.CacheLimits.MaxBytes), MaxAge: time.Duration(fc.CacheLimits.MaxAge)},
		MaxConcurrentCommands: fc.Commands.MaxConcurrent,
		ShutdownGrace:         time.Duration(fc.Commands.ShutdownGrace),
		Outbox:                OutboxLimits{MaxBytes: int64(fc.Outbox.MaxBytes), MaxAge: time.Duration(fc.Outbox.MaxAge)},
		Limits:                l.limits([]any{"tools", "limits"}, fc.Tools.Limits),
		AllowEnv:              l.envNames([]any{"tools", "allow_env"}, fc.Tools.AllowEnv),
		RequireSigned:         fc.Tools.RequireSigned,
		MaxConcurrentCalls:    fc.Tools.MaxCalls,
		MaxReservedMemory:     uint64(fc.Tools.MaxCallMemory),
		UnloadAfter:           time.Duration(fc.Tools.UnloadAfter),
		PrepareBeforeRegister: time.Duration(fc.Tools.PrepareBefore),
		Reproducible:          fc.Tools.Reproducible,
		MemoryLimit:           int64(fc.MemoryLimit),
		GCPercent:             fc.GCPercent,
		MCPServe:              MCPServe{Listen: fc.MCPServe.Listen, TokenFile: l.abs(fc.MCPServe.TokenFile), MaxSessions: fc.MCPServe.MaxSessions},
	}
	if err := checkMCPListen(fc.MCPServe.Listen); err != nil {
		l.fail([]any{"mcp_serve", "listen"}, "%v", err)
	}
	if fc.MCPServe.MaxSessions < 0 {
		l.fail([]any{"mcp_serve", "max_sessions"}, "%d: want a number of sessions, or 0 for the default", fc.MCPServe.MaxSessions)
	}
	if fc.Device.ID != "" && !validDeviceID.MatchString(fc.Device.ID) {
		l.fail([]any{"device", "id"}, "%q: want 1-64 of [A-Za-z0-9._-], not starting with '.'", fc.Device.ID)
	}
	cfg.ServerURL, cfg.ServerURLs = l.servers(fc)
	l.tlsFiles(cfg)
	if err := checkPing(time.Duration(fc.Server.Ping)); err != nil {
		l.fail([]any{"server", "ping"}, "%v", err)
	}
	if fc.Outbox.MaxAge != 0 {
		if err := checkOutboxAge(time.Duration(fc.Outbox.MaxAge)); err != nil {
			l.fail([]any{"outbox", "max_age"}, "%v", err)
		}
	}
	if fc.Outbox.MaxBytes != 0 {
		frame := cmp.Or(int64(fc.Server.MaxFrame), protocol.DefaultMaxFrameBytes)
		if err := checkOutboxBytes(int64(fc.Outbox.MaxBytes), frame); err != nil {
			l.fail([]any{"outbox", "max_bytes"}, "%v (server.max_frame)", err)
		}
	}
	if fc.GCPercent < 0 {
		l.fail([]any{"gc_percent"}, "must not be negative (GOGC=off is for the environment, not the config)")
	}
	if fc.Commands.MaxConcurrent < 0 {
		l.fail([]any{"commands", "max_concurrent"}, "must not be negative")
	}
	if fc.Tools.MaxCalls < 0 {
		l.fail([]any{"tools", "max_calls"}, "must not be negative")
	}
	if fc.Server.Wire != "" {
		var err error
		if cfg.Wire, err = parseWire(fc.Server.Wire); err != nil {
			l.fail([]any{"server", "wire"}, "%v", err)
		}
		cfg.wireSet = true
	}
	cfg.ToolDirs = l.toolDirs(fc.Tools.Dirs)
	cfg.Mounts = l.mounts([]any{"tools", "allow_dirs"}, fc.Tools.AllowDirs)
	cfg.TrustedKeys = l.keys([]any{"tools", "trusted_keys"}, fc.Tools.TrustedKeys)
	cfg.ReleaseKeys = l.keys([]any{"updates", "release_keys"}, fc.Updates.ReleaseKeys)
	cfg.Policies = l.policies(fc.Tools.Policies)
	cfg.MCP = l.mcp(fc.MCP)
	return cfg
}

// servers reads server.url or server.urls: one URL, or several. The
// flags' --server, repeatable, sets server.urls; one is the URL.
func (l *loader) servers(fc *fileConfig) (string, []string) {
	urls := fc.Server.URLs
	if fc.Server.URL != "" && len(urls) > 0 {
		l.fail([]any{"server", "urls"}, "give server.url or server.urls, not both")
	}
	if urls != nil && len(urls) == 0 {
		// Left as it is, the agent would dial the default server.
		l.fail([]any{"server", "urls"}, "empty: give at least one ws:// or wss:// URL")
	}
	if fc.Server.URL != "" {
		if err := checkServerURL(fc.Server.URL); err != nil {
			l.fail([]any{"server", "url"}, "%v", err)
		}
		return fc.Server.URL, nil
	}
	for i, u := range urls {
		if err := checkServerURL(u); err != nil {
			l.fail([]any{"server", "urls", i}, "%v", err)
		}
	}
	if len(urls) == 1 {
		return urls[0], nil
	}
	return "", urls
}

// tlsFiles checks that the CA bundle and the device certificate and key
// given read: the agent could not connect without them.
func (l *loader) tlsFiles(cfg Config) {
	if cfg.CAFile != "" {
		if _, err := tlsfiles.CertPool(cfg.CAFile); err != nil {
			l.fail([]any{"server", "ca"}, "%v", err)
		}
	}
	if cfg.CertFile != "" && cfg.KeyFile != "" {
		if _, err := tlsfiles.KeyPair(cfg.CertFile, cfg.KeyFile); err != nil {
			l.fail([]any{"server", "cert"}, "%v", err)
		}
	}
}

// toolDirs resolves the tool dirs, "DIR" or "NAMESPACE=DIR", each of which
// must be a directory: the agent would not start without it.
func (l *loader) toolDirs(specs []string) []string {
	var out []string
	for i, spec := range specs {
		ns, dir, named := strings.Cut(spec, "=")
		if !named {
			dir = spec
		}
		dir = l.abs(dir)
		if fi, err := os.Stat(dir); err != nil {
			l.fail([]any{"tools", "dirs", i}, "%v", err)
		} else if !fi.IsDir() {
			l.fail([]any{"tools", "dirs", i}, "%s is not a directory", dir)
		}
		if named {
			dir = ns + "=" + dir
		}
		out = append(out, dir)
	}
	return out
}

func (l *loader) limits(path []any, fl fileLimits) sandbox.Limits {
	lim := sandbox.Limits{
		Timeout:     time.Duration(fl.Timeout),
		StdoutBytes: int(fl.Stdout),
		StderrBytes: int(fl.Stderr),
		Fuel:        fl.Fuel,
	}
	const page = 64 << 10
	if fl.Memory != 0 && fl.Memory < page {
		l.fail(append(path, "memory"), "%d bytes is less than one 64 KiB page", fl.Memory)
	}
	lim.MemoryPages = uint32(min(int64(fl.Memory)/page, 1<<16))
	return lim
}

func (l *loader) mounts(path []any, specs []string) []sandbox.Mount {
	var out []sandbox.Mount
	for i, spec := range specs {
		host, rest, _ := strings.Cut(spec, ":")
		if host != "" {
			spec = strings.TrimSuffix(l.abs(host)+":"+rest, ":")
		}
		m, err := sandbox.ParseMount(spec)
		if err != nil {
			l.fail(append(path, i), "%v", err)
			continue
		}
		out = append(out, m)
	}
	return out
}

func (l *loader) keys(path []any, files []string) []ed25519.PublicKey {
	var out []ed25519.PublicKey
	for i, f := range files {
		k, err := signature.LoadPublicKey(l.abs(f))
		if err != nil {
			l.fail(append(path, i), "%v", err)
			continue
		}
		out = append(out, k)
	}
	return out
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (l *loader) envNames(path []any, names []string) []string {
	for i, e := range names {
		if !envName.MatchString(e) {
			l.fail(append(path, i), "%q is not an environment variable name", e)
		}
	}
	return names
}

// policies reads the policies by "NAMESPACE" or "NAMESPACE.TOOL".
func (l *loader) policies(ps map[string]filePolicy) map[string]sandbox.Policy {
	if len(ps) == 0 {
		return nil
	}
	out := map[string]sandbox.Policy{}
	for _, name := range sortedKeys(ps) {
		p, path := ps[name], []any{"tools", "policies", name}
		if strings.Count(name, ".") > 1 || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
			l.fail(path, "%q: want NAMESPACE or NAMESPACE.TOOL", name)
		}
		out[name] = sandbox.Policy{
			Dirs:   l.mounts(append(path, "dirs"), p.Dirs),
			Env:    l.envNames(append(path, "env"), p.Env),
			Limits: l.limits(append(path, "limits"), p.Limits),
		}
	}
	return out
}

func (l *loader) mcp(agents map[string]map[string]fileMCPRoot) MCPConfig {
	if len(agents) == 0 {
		return nil
	}
	type definition struct {
		path []any
		cfg  MCPServerConfig
	}
	out := MCPConfig{}
	defined := map[string]definition{} // the first definition of each namespace
	for _, agentName := range sortedKeys(agents) {
		out[agentName] = map[string]MCPRoot{}
		for _, rootName := range sortedKeys(agents[agentName]) {
			root := agents[agentName][rootName]
			var r MCPRoot
			for _, sec := range []struct {
				name string
				in   []fileMCPServer
				out  *[]MCPServerConfig
			}{{"data_collection", root.DataCollection, &r.DataCollection}, {"action", root.Action, &r.Action}} {
				for i, fs := range sec.in {
					path := []any{"mcp", agentName, rootName, sec.name, i}
					s := l.mcpServer(path, fs)
					if first, ok := defined[s.Namespace]; !ok {
						defined[s.Namespace] = definition{path, s}
					} else if !sameServer(first.cfg, s) {
						l.fail(path, "namespace %q is defined at line %d with other settings", s.Namespace, lineOf(&l.doc, first.path))
					}
					*sec.out = append(*sec.out, s)
				}
			}
			out[agentName][rootName] = r
		}
	}
	return out
}

func (l *loader) mcpServer(path []any, fs fileMCPServer) MCPServerConfig {
	s := MCPServerConfig{
		Namespace: fs.Namespace,
		Type:      fs.Type,
		Command:   fs.Command,
		StartArgs: fs.StartArgs,
		Env:       fs.Env,
		Cwd:       l.abs(fs.Cwd),
		URL:       fs.URL,
		Reset:     fs.Reset,
		Timeout:   time.Duration(fs.Timeout),
	}
	if fs.Type != MCPStdio && fs.Type != MCPHTTP {
		l.fail(append(path, "type"), "want stdio or http, got %q", fs.Type)
		return s
	}
	if err := s.check(); err != nil {
		l.fail(path, "%v", err)
	}
	return s
}

// lineOf finds the line of the value at path in doc: of its key, for a
// map entry, whose value may start on the next line. Where the path ends
// early, as for a missing field, it gives the line of the last node found.
func lineOf(doc *yaml.Node, path []any) int {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, p := range path {
		next, at := child(n, p)
		if next == nil {
			break
		}
		n, line = next, at
	}
	return line
}

// child is the node under n at p, a map key or a list index, and the line
// that names it.
func child(n *yaml.Node, p any) (*yaml.Node, int) {
	switch k := p.(type) {
	case string:
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == k {
					return n.Content[i+1], n.Content[i].Line
				}
			}
		}
	case int:
		if n.Kind == yaml.SequenceNode && k < len(n.Content) {
			return n.Content[k], n.Content[k].Line
		}
	}
	return nil, 0
}

// dotted writes a path as the file's reader would: tools.allow_dirs[0].
func dotted(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch k := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", k)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, k)
		}
	}
	return b.String()
}

var (
	yamlLine         = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)
	yamlTypeName     = regexp.MustCompile(` (?:in|into) type config\.\w+`)
	yamlUnknownField = regexp.MustCompile(`^line (\d+): field (.*?) not found in type `)
)

// yamlError rewrites the YAML library's errors as file:line: problem, and
// an unknown key as file:line: section.key: unknown field, with the field
// it likely meant, rather than with the Go type it is not in.
func (l *loader) yamlError(err error) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if sub := yamlUnknownField.FindStringSubmatch(m); sub != nil {
			line, _ := strconv.Atoi(sub[1])
			path := keyPath(&l.doc, line, sub[2])
			if path == nil {
				path = []any{sub[2]}
			}
			errs[i] = fmt.Errorf("%s:%d: %s: unknown field%s", l.file, line, dotted(path), unknownFieldHint(path))
			continue
		}
		m = yamlTypeName.ReplaceAllString(m, "")
		if sub := yamlLine.FindStringSubmatch(m); sub != nil {
			errs[i] = fmt.Errorf("%s:%s: %s", l.file, sub[1], m[len(sub[0]):])
		} else {
			errs[i] = fmt.Errorf("%s: %s", l.file, strings.TrimPrefix(m, "yaml: "))
		}
	}
	return errors.Join(errs...)
}

// keyPath is the path from n to the map key named key on line, nil if
// there is none.
func keyPath(n *yaml.Node, line int, key string) []any {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if p := keyPath(c, line, key); p != nil {
				return p
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Line == line && k.Value == key {
				return []any{key}
			}
			if p := keyPath(v, line, key); p != nil {
				return append([]any{k.Value}, p...)
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if p := keyPath(c, line, key); p != nil {
				return append([]any{i}, p...)
			}
		}
	}
	return nil
}

// parseWire reads an encoding by its name.
func parseWire(s string) (protocol.Encoding, error) {
	switch s {
	case "cbor":
		return protocol.CBOR, nil
	case "json":
		return protocol.JSON, nil
	}
	return protocol.CBOR, fmt.Errorf("want cbor or json, got %q", s)
}

// duration is a duration with a unit, such as 30s or 5m, in the file or
// in a flag.
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %q is not a duration such as 30s or 5m", n.Line, n.Value)
	}
	if err := d.Set(n.Value); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}

// Set parses s, as a flag.Value does.
func (d *duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a duration such as 30s or 5m", s)
	}
	*d = duration(v)
	return nil
}

// byteSize is a size in bytes, in the file or in a flag: a number, or a
// number with one of the units B, KiB, MiB or GiB, as in tool manifests.
type byteSize int64

func (b *byteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: %q is not a size such as 16MiB or 65536", n.Line, n.Value)
	}
	if err := b.Set(n.Value); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}

// Set parses s, as a flag.Value does.
func (b *byteSize) Set(s string) error {
	v, err := manifest.ParseByteSize(s)
	if err != nil || v > math.MaxInt64 {
		return fmt.Errorf("%q is not a size such as 16MiB or 65536", s)
	}
	*b = byteSize(v)
	return nil
}
