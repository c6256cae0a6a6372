// Command aip-server is the edgeaip server: the device gateway (GET /ws)
// and the operator API (/api).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/edgeaip/edgeaip/internal/logging"
	"github.com/edgeaip/edgeaip/internal/version"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server"
	"github.com/edgeaip/edgeaip/server/plan"
)

func main() {
	if len(os.Args) > 1 {
		if cmd, ok := subcommands[os.Args[1]]; ok {
			if err := cmd(os.Args[2:], os.Stdout); err != nil {
				fmt.Fprintln(os.Stderr, "aip-server:", err)
				os.Exit(1)
			}
			return
		}
	}
	listen := flag.String("listen", "127.0.0.1:8700", "address to serve on")
	data := flag.String("data", "./aip-data", "data directory: database (unless --store) and operator token")
	var sessions server.SessionConfig
	flag.IntVar(&sessions.MaxSessions, "max-sessions", 1000, "sessions that may run at once; more get 503")
	flag.DurationVar(&sessions.ResultTTL, "result-ttl", 7*24*time.Hour, "how long finished tasks and their results are kept")
	flag.DurationVar(&sessions.DeviceGrace, "device-grace", time.Minute, "how long a device whose link dropped has to come back before its tasks are cancelled")
	flag.DurationVar(&sessions.PreparationBound, "preparation-bound", server.DefaultPreparationBound, "how much longer a command may wait, beyond its timeout, while its device says it is preparing the tool (instrumenting, compiling, initializing it)")
	var st server.StoreConfig
	flag.StringVar(&st.URL, "store", "", "PostgreSQL database (postgres://…) to keep the store in, instead of SQLite in --data")
	flag.IntVar(&st.Readers, "db-readers", 0, "database connections that serve reads at once (default max(4, 2 × GOMAXPROCS))")
	flag.DurationVar(&st.ReaderIdle, "db-reader-idle", time.Minute, "close a database reader unused this long")
	flag.IntVar(&st.UnrecordedWrites, "unrecorded-writes", 10_000, "writes the database could not take (a full disk) kept in memory to retry; past this, results stay with their devices")
	flag.Int64Var(&st.UnrecordedBytes, "unrecorded-bytes", 64<<20, "bytes of results and task ends kept in memory for a database that cannot take them; past this, as --unrecorded-writes")
	var clusterCfg server.ClusterConfig
	flag.StringVar(&clusterCfg.NATS, "nats", "", "NATS server URL (nats://…, nats://USER:PASSWORD@…, tls://…; several, comma-separated): run as a node of a cluster, which needs a PostgreSQL --store")
	flag.StringVar(&clusterCfg.NATSCA, "nats-ca", "", "PEM `file` of the CAs a tls:// NATS server's certificate must chain to, instead of the system's")
	flag.StringVar(&clusterCfg.NodeID, "node-id", "", "this node's id in the cluster (default: the host's name)")
	flag.StringVar(&clusterCfg.Address, "advertise", "", "the address the cluster lists for this node (default: --listen's)")
	flag.DurationVar(&clusterCfg.NATSPingInterval, "nats-ping", server.DefaultNATSPingInterval, "cluster mode: how often the node pings NATS; a connection with --nats-max-pings pings unanswered at the next is taken as dead, and cross-node work refused until NATS is back")
	flag.IntVar(&clusterCfg.NATSMaxPingsOut, "nats-max-pings", server.DefaultNATSMaxPingsOut, "cluster mode: unanswered pings to NATS after which its connection is taken as dead (see --nats-ping)")
	flag.DurationVar(&clusterCfg.DrainGrace, "drain-grace", server.DefaultDrainGrace, "cluster mode: on SIGTERM, how long running tasks may finish before the rest are handed off to the other nodes (a second SIGTERM stops at once)")
	var conn protocol.ConnOptions
	flag.Int64Var(&conn.MaxFrameBytes, "max-frame", protocol.DefaultMaxFrameBytes, "largest WebSocket frame accepted, in bytes; a larger one closes the link with 1009")
	flag.DurationVar(&conn.PingInterval, "ping", protocol.DefaultPingInterval, "the devices' ping interval: the server pings a link silent for this and 5s more, and drops one silent for this and 10s more (a fifth of it)")
	var limits server.Limits
	var mcpCfg server.MCPConfig
	flag.IntVar(&mcpCfg.DirectTools, "mcp-direct-tools", 8, "an identity whose scope covers at most this many devices sees each of their tools as DEVICE__TOOL on /mcp (negative: never)")
	flag.DurationVar(&mcpCfg.OfflineToolsGrace, "mcp-offline-tools-grace", 24*time.Hour, "an offline device's DEVICE__TOOL tools stay listed on /mcp, said to be offline since it was last heard from, for this long after (negative: they go with the device)")
	flag.IntVar(&mcpCfg.ToolsPageSize, "mcp-tools-page-size", 50, "tools in one page of tools/list on /mcp; a client asks for the next with the page's cursor")
	flag.IntVar(&mcpCfg.CallsPerMinute, "mcp-calls-per-minute", 120, "tool calls one identity may make on /mcp in a minute")
	flag.IntVar(&mcpCfg.CallsAtOnce, "mcp-calls-at-once", 8, "tool calls one identity may have running on /mcp at once")
	flag.IntVar(&mcpCfg.MaxResultBytes, "mcp-max-result-bytes", 64<<10, "largest result, as JSON, an answer on /mcp carries; a larger one is cut, with the task's URL")
	flag.IntVar(&mcpCfg.MaxSessionsPerIdentity, "mcp-max-sessions-per-identity", 256, "MCP sessions one identity holds on /mcp on this node; past it a new one takes the place of its oldest idle one, or gets 429 if all are busy")
	flag.IntVar(&mcpCfg.MaxSessions, "mcp-max-sessions", 4096, "MCP sessions every identity together holds on /mcp on this node; past it a new one takes the place of the oldest idle one, or gets 429 if all are busy")
	flag.DurationVar(&mcpCfg.SessionIdleTTL, "mcp-session-idle-ttl", 30*time.Minute, "an MCP session on /mcp that makes no request, and whose stream carries nothing, for this long is dropped (a client that went away without DELETE); negative: never")
	flag.DurationVar(&mcpCfg.TaskMaxTTL, "mcp-task-max-ttl", 24*time.Hour, "the longest ttl a call run as an MCP task gets (how long it may wait for its device and run; at most 24h); a client asking for more gets this")
	var rolloutsCfg server.RolloutsConfig
	flag.IntVar(&rolloutsCfg.Concurrency, "rollout-concurrency", server.DefaultRolloutConcurrency, "devices changing at once for rollouts, across them all")
	flag.DurationVar(&rolloutsCfg.Sweep, "rollout-sweep", server.DefaultRolloutSweep, "how often each rollout is reconciled though no event (an apply, a relabel, a device linking) asked for it")
	flag.IntVar(&limits.MaxPlanBytes, "max-plan-bytes", plan.DefaultMaxExpandedBytes, "largest plan accepted, in bytes as JSON once its YAML aliases are expanded")
	flag.IntVar(&limits.MaxParamBytes, "max-param-bytes", 0, "largest parameters of one command accepted, in bytes as JSON (0: the frame cap)")
	pprof := flag.Bool("pprof", false, "serve Go's profiles under /debug/pprof/, to an unscoped admin")
	secureCookies := flag.Bool("secure-cookies", false, "mark the dashboard's login cookie Secure even on plain HTTP, behind a TLS proxy that sends no X-Forwarded-Proto")
	var trusted []netip.Prefix
	flag.Func("trusted-proxy", "a proxy (CIDR, or an address) whose X-Forwarded-For names a request's source, for the limit on failed authentications (repeatable)",
		func(s string) error {
			p, err := parsePrefix(s)
			trusted = append(trusted, p)
			return err
		})
	var tlsFiles server.TLSFiles
	flag.StringVar(&tlsFiles.Cert, "tls-cert", "", "PEM `file` of the server's certificate chain: serve HTTPS and WSS (reloaded on SIGHUP)")
	flag.StringVar(&tlsFiles.Key, "tls-key", "", "PEM `file` of the key of --tls-cert")
	flag.StringVar(&tlsFiles.ClientCA, "client-ca", "", "PEM `file` of CAs whose device certificates (naming ID.devices.edgeaip) stand in for a device token")
	flag.StringVar(&tlsFiles.DeviceCACert, "device-ca-cert", "", "PEM `file` of a CA that signs devices' certificate requests (aipctl device enroll --csr); its certificates are taken as --client-ca's")
	flag.StringVar(&tlsFiles.DeviceCAKey, "device-ca-key", "", "PEM `file` of the key of --device-ca-cert")
	flag.DurationVar(&tlsFiles.DeviceCertValidity, "device-cert-validity", server.DefaultDeviceCertValidity, "how long a device certificate the server signs is valid")
	var logOpts logging.Options
	logOpts.RegisterFlags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "print the server's version, commit, Go version and platform, and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println("aip-server", version.Get())
		return
	}

	log := logOpts.New(os.Stderr)
	cfg := server.Config{Sessions: sessions, Store: st, Conn: conn, Limits: limits, MCP: mcpCfg, Rollouts: rolloutsCfg, Logger: log,
		SecureCookies: *secureCookies, TrustedProxies: trusted, TLS: tlsFiles, Pprof: *pprof, Cluster: clusterCfg}
	if err := run(*listen, *data, cfg); err != nil {
		log.Error("aip-server failed", "err", err)
		os.Exit(1)
	}
}

func run(listen, data string, cfg server.Config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	log := cfg.Logger
	// Bound first: a busy port then fails the start before the data dir,
	// the operator token or the database is written.
	ln, err := server.Listen(ctx, listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	cfg.DataDir = data
	cfg.Cluster.Address = cmp.Or(cfg.Cluster.Address, ln.Addr().String())
	srv, err := server.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	hs := newHTTPServer(srv.Handler(), log)
	hs.TLSConfig = srv.TLSConfig()
	// Caught before the server says it listens: a SIGHUP then never kills it.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	errc := make(chan error, 1)
	go func() { errc <- serve(hs, ln) }()
	log.Info("aip-server listening", "addr", ln.Addr().String(), "data", data, "tls", hs.TLSConfig != nil, "version", version.Version())

	if err := untilStopped(ctx, errc, hup, func() { reloadTLS(srv, log) }); err != nil {
		return err
	}
	stop() // a second signal stops at once: the cluster then adopts what ran here, as after a crash
	if cfg.Cluster.NATS != "" {
		if _, err := srv.Drain(context.Background(), cfg.Cluster.DrainGrace); err != nil {
			log.Error("drain failed", "err", err)
		}
	}
	log.Info("shutting down")
	srv.Shutdown()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// serve serves on ln, over TLS if hs has a TLS config.
func serve(hs *http.Server, ln net.Listener) error {
	if hs.TLSConfig != nil {
		return hs.ServeTLS(ln, "", "")
	}
	return hs.Serve(ln)
}

// untilStopped waits for ctx to end, calling reload on each signal on
// hup, or returns the error that ended serving.
func untilStopped(ctx context.Context, errc <-chan error, hup <-chan os.Signal, reload func()) error {
	for {
		select {
		case err := <-errc:
			return err
		case <-hup:
			reload()
		case <-ctx.Done():
			return nil
		}
	}
}

// reloadTLS reads the TLS files again, on SIGHUP.
func reloadTLS(srv *server.Server, log *slog.Logger) {
	if err := srv.ReloadTLS(); err != nil {
		log.Warn("SIGHUP: TLS files not reloaded; serving those loaded before", "err", err)
	}
}

// newHTTPServer serves h, with net/http's own complaints (a handler that
// panicked, a failed accept) logged through log, so that they are JSON
// lines like the rest under --log-format json.
func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)}
}

// parsePrefix reads a CIDR, or a single address as the prefix of it
// alone.
func parsePrefix(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, fmt.Errorf("%q: want a CIDR such as 10.0.0.0/8, or an address", s)
	}
	return p.Masked(), nil
}
