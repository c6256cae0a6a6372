// Command aip-server is the edgeaip server: the device gateway (GET /ws)
// and the operator API (/api).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
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
	var st server.StoreConfig
	flag.IntVar(&st.Readers, "db-readers", 0, "database connections that serve reads at once (default max(4, 2 × GOMAXPROCS))")
	flag.DurationVar(&st.ReaderIdle, "db-reader-idle", time.Minute, "close a database reader unused this long")
	flag.IntVar(&st.UnrecordedWrites, "unrecorded-writes", 10_000, "writes the database could not take (a full disk) kept in memory to retry; past this, results stay with their devices")
	flag.Int64Var(&st.UnrecordedBytes, "unrecorded-bytes", 64<<20, "bytes of results and task ends kept in memory for a database that cannot take them; past this, as --unrecorded-writes")
	var conn protocol.ConnOptions
	flag.Int64Var(&conn.MaxFrameBytes, "max-frame", protocol.DefaultMaxFrameBytes, "largest WebSocket frame accepted, in bytes; a larger one closes the link with 1009")
	flag.DurationVar(&conn.PingInterval, "ping", protocol.DefaultPingInterval, "the devices' ping interval: the server pings a link silent for this and 5s more, and drops one silent for this and 10s more (a fifth of it)")
	var limits server.Limits
	flag.IntVar(&limits.MaxPlanBytes, "max-plan-bytes", plan.DefaultMaxExpandedBytes, "largest plan accepted, in bytes as JSON once its YAML aliases are expanded")
	flag.IntVar(&limits.MaxParamBytes, "max-param-bytes", 0, "largest parameters of one command accepted, in bytes as JSON (0: the frame cap)")
	pprof := flag.Bool("pprof", false, "serve Go's profiles under /debug/pprof/, with the operator token")
	secureCookies := flag.Bool("secure-cookies", false, "mark the dashboard's login cookie Secure even on plain HTTP, behind a TLS proxy that sends no X-Forwarded-Proto")
	var logOpts logging.Options
	logOpts.RegisterFlags(flag.CommandLine)
	flag.Parse()

	log := logOpts.New(os.Stderr)
	if err := run(*listen, *data, server.Config{Sessions: sessions, Store: st, Conn: conn, Limits: limits, Logger: log,
		SecureCookies: *secureCookies, Pprof: *pprof}); err != nil {
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
	srv, err := server.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
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
