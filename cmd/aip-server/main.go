// Command aip-server is the edgeaip server: the device gateway (GET /ws)
// and the operator API (/api).
package main

import (
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
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server"
	"github.com/edgeaip/edgeaip/server/plan"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8700", "address to serve on")
	data := flag.String("data", "./aip-data", "data directory: database and operator token")
	var sessions server.SessionConfig
	flag.IntVar(&sessions.MaxSessions, "max-sessions", 1000, "sessions that may run at once; more get 503")
	flag.DurationVar(&sessions.ResultTTL, "result-ttl", 7*24*time.Hour, "how long finished tasks and their results are kept")
	flag.DurationVar(&sessions.DeviceGrace, "device-grace", time.Minute, "how long a device whose link dropped has to come back before its tasks are cancelled")
	var conn protocol.ConnOptions
	flag.Int64Var(&conn.MaxFrameBytes, "max-frame", protocol.DefaultMaxFrameBytes, "largest WebSocket frame accepted, in bytes; a larger one closes the link with 1009")
	flag.DurationVar(&conn.PingInterval, "ping", protocol.DefaultPingInterval, "WebSocket ping interval; a link silent for two is dropped")
	var limits server.Limits
	flag.IntVar(&limits.MaxPlanBytes, "max-plan-bytes", plan.DefaultMaxExpandedBytes, "largest plan accepted, in bytes as JSON once its YAML aliases are expanded")
	flag.IntVar(&limits.MaxParamBytes, "max-param-bytes", 0, "largest parameters of one command accepted, in bytes as JSON (0: the frame cap)")
	secureCookies := flag.Bool("secure-cookies", false, "mark the dashboard's login cookie Secure even on plain HTTP, behind a TLS proxy that sends no X-Forwarded-Proto")
	var trusted []netip.Prefix
	flag.Func("trusted-proxy", "a proxy (CIDR, or an address) whose X-Forwarded-For names a request's source, for the limit on failed authentications (repeatable)",
		func(s string) error {
			p, err := parsePrefix(s)
			trusted = append(trusted, p)
			return err
		})
	var logOpts logging.Options
	logOpts.RegisterFlags(flag.CommandLine)
	flag.Parse()

	log := logOpts.New(os.Stderr)
	cfg := server.Config{Sessions: sessions, Conn: conn, Limits: limits, Logger: log, SecureCookies: *secureCookies, TrustedProxies: trusted}
	if err := run(*listen, *data, cfg); err != nil {
		log.Error("aip-server failed", "err", err)
		os.Exit(1)
	}
}

func run(listen, data string, cfg server.Config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	log := cfg.Logger
	cfg.DataDir = data
	srv, err := server.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := newHTTPServer(srv.Handler(), log)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Info("aip-server listening", "addr", ln.Addr().String(), "data", data)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
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
