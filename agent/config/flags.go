package config

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
)

// Flags is the agent's command line. Each flag stands for a key of the
// config file and sets it in the file's shape, so that a flag's value goes
// through the parser the file's does, and is refused as the file's would
// be: "--wire: want cbor or json, got "xml"".
type Flags struct {
	file string     // --config
	set  fileConfig // what the flags given set; nothing else
}

// flagKey is one flag: the key of the config file it stands for, and how
// it sets that key in the file's shape.
type flagKey struct {
	name  string
	key   []any
	usage string
	set   func(fc *fileConfig, v string) error
	bool  bool
}

// flagKeys are the flags, each with its key of the config file.
var flagKeys = []flagKey{
	{name: "server", key: []any{"server", "urls"}, usage: "server WebSocket `URL` (default " + DefaultServerURL + "); " +
		"repeatable, for the nodes of a cluster: each device tries them, and each address of a host name, " +
		"in an order of its own, stays on one while it holds, and moves to the next when it fails or drains",
		set: func(fc *fileConfig, v string) error { fc.Server.URLs = append(fc.Server.URLs, v); return nil }},
	{name: "id", key: []any{"device", "id"}, usage: "device `id`, as enrolled with aipctl device enroll",
		set: func(fc *fileConfig, v string) error { fc.Device.ID = v; return nil }},
	{name: "token-file", key: []any{"server", "token_file"}, usage: "`file` holding the device token",
		set: func(fc *fileConfig, v string) error { fc.Server.TokenFile = v; return nil }},
	{name: "ca", key: []any{"server", "ca"}, usage: "PEM `file` of the CAs a wss:// server's certificate is checked against (default: the system's)",
		set: func(fc *fileConfig, v string) error { fc.Server.CA = v; return nil }},
	{name: "cert", key: []any{"server", "cert"}, usage: "PEM `file` of the device's certificate, for a wss:// server; one naming ID.devices.edgeaip stands in for the token",
		set: func(fc *fileConfig, v string) error { fc.Server.Cert = v; return nil }},
	{name: "key", key: []any{"server", "key"}, usage: "PEM `file` of the key of --cert",
		set: func(fc *fileConfig, v string) error { fc.Server.Key = v; return nil }},
	{name: "tools", key: []any{"tools", "dirs"}, usage: "`directory` of tool modules, DIR or NAMESPACE=DIR (repeatable)",
		set: func(fc *fileConfig, v string) error { fc.Tools.Dirs = append(fc.Tools.Dirs, v); return nil }},
	{name: "allow-dir", key: []any{"tools", "allow_dirs"}, usage: "host `directory` tools may use, HOST[:GUEST][:ro] (repeatable)",
		set: func(fc *fileConfig, v string) error { fc.Tools.AllowDirs = append(fc.Tools.AllowDirs, v); return nil }},
	{name: "data", key: []any{"data_dir"}, usage: "data `directory`: outbox, compile cache and deployed tools",
		set: func(fc *fileConfig, v string) error { fc.DataDir = v; return nil }},
	{name: "heartbeat", key: []any{"server", "heartbeat"}, usage: "heartbeat `interval` (default none on cbor, 20s on json)",
		set: func(fc *fileConfig, v string) error { return fc.Server.Heartbeat.Set(v) }},
	{name: "wire", key: []any{"server", "wire"}, usage: "wire `encoding`: cbor (edgeaip server) or json (UFO server) (default cbor)",
		set: func(fc *fileConfig, v string) error { fc.Server.Wire = v; return nil }},
	{name: "trusted-key", key: []any{"tools", "trusted_keys"}, usage: "PEM public key `file` tool signatures are checked against (repeatable)",
		set: func(fc *fileConfig, v string) error {
			fc.Tools.TrustedKeys = append(fc.Tools.TrustedKeys, v)
			return nil
		}},
	{name: "release-key", key: []any{"updates", "release_keys"}, usage: "PEM public key `file` agent releases are checked against (repeatable); with one, the agent updates itself",
		set: func(fc *fileConfig, v string) error {
			fc.Updates.ReleaseKeys = append(fc.Updates.ReleaseKeys, v)
			return nil
		}},
	{name: "require-signed", key: []any{"tools", "require_signed"}, bool: true,
		usage: "refuse unsigned tool modules (default: true once a --trusted-key is given)",
		set: func(fc *fileConfig, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return err
			}
			fc.Tools.RequireSigned = &b
			return nil
		}},
	{name: "allow-env", key: []any{"tools", "allow_env"}, usage: "environment `variable` tools may read, if their manifest asks (repeatable)",
		set: func(fc *fileConfig, v string) error { fc.Tools.AllowEnv = append(fc.Tools.AllowEnv, v); return nil }},
	{name: "mcp-listen", key: []any{"mcp_serve", "listen"}, usage: "`address` of the agent's own MCP endpoint for local applications, HOST:PORT (default: off)",
		set: func(fc *fileConfig, v string) error { fc.MCPServe.Listen = v; return nil }},
	{name: "mcp-max-sessions", key: []any{"mcp_serve", "max_sessions"},
		usage: "`sessions` the agent's MCP endpoint holds; past it a new one takes the place of the oldest idle one, or gets 429 if all are busy (default 64)",
		set:   func(fc *fileConfig, v string) (err error) { fc.MCPServe.MaxSessions, err = strconv.Atoi(v); return err }},
	{name: "max-calls", key: []any{"tools", "max_calls"}, usage: "tool `calls` that run at once; the rest queue (default GOMAXPROCS)",
		set: func(fc *fileConfig, v string) (err error) { fc.Tools.MaxCalls, err = strconv.Atoi(v); return err }},
	{name: "max-call-memory", key: []any{"tools", "max_call_memory"},
		usage: "`memory` running tool calls may reserve together, e.g. 256MiB (default 256MiB)",
		set:   func(fc *fileConfig, v string) error { return fc.Tools.MaxCallMemory.Set(v) }},
}

// Register defines the flags on fs, and --config, the file they override.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.file, "config", "", "agent config file (YAML); flags override it")
	for _, k := range flagKeys {
		set := func(v string) error { return k.set(&f.set, v) }
		if k.bool {
			fs.BoolFunc(k.name, k.usage, set)
		} else {
			fs.Func(k.name, k.usage, set)
		}
	}
}

// Config is the agent's config: the defaults, the --config file over them,
// and the flags that were given over both. It names each setting the agent
// cannot run without that none of them gave.
func (f *Flags) Config() (Config, error) {
	cfg := Default()
	if f.file != "" {
		file, err := Load(f.file)
		if err != nil {
			return file, err
		}
		cfg = cfg.Merge(file)
	}
	l := &loader{locate: flagOf}
	cfg = cfg.Merge(l.config(&f.set))
	return cfg, errors.Join(append(l.errs, f.missing(cfg)...)...)
}

// flagOf locates a value the flags set: by the flag that sets its key.
func flagOf(path []any) string {
	for _, k := range flagKeys {
		if len(path) >= len(k.key) && slices.Equal(path[:len(k.key)], k.key) {
			return "--" + k.name
		}
	}
	return dotted(path)
}

// missing names each setting the agent cannot run without that cfg lacks:
// as the file's key when there is a file.
func (f *Flags) missing(cfg Config) []error {
	var errs []error
	for _, k := range []struct {
		key []any
		set bool
		or  string // what else would do
	}{
		{[]any{"device", "id"}, cfg.ID != "", ""},
		{[]any{"server", "token_file"}, cfg.TokenFile != "" || cfg.CertFile != "", "; or a device certificate, --cert and --key"},
		{[]any{"data_dir"}, cfg.DataDir != "", ""},
	} {
		switch {
		case k.set:
		case f.file != "":
			errs = append(errs, fmt.Errorf("%s: %s: missing (or %s%s)", f.file, dotted(k.key), flagOf(k.key), k.or))
		default:
			errs = append(errs, fmt.Errorf("%s: missing (or %s in a --config file%s)", flagOf(k.key), dotted(k.key), k.or))
		}
	}
	return errs
}
