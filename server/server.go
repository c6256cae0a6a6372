package server

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/dashboard"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/metrics"
)

// Config configures a Server.
type Config struct {
	// DataDir holds the database and the operator token. It is created
	// with mode 0700 if missing.
	DataDir string
	// Conn tunes client connections (frame cap, ping interval). With the
	// default ping interval of 15 s, a dead link is noticed within 30 s.
	Conn protocol.ConnOptions
	// Sessions tunes the session manager: limits, result TTL, device grace.
	Sessions SessionConfig
	// Limits bound what one request may ask of devices: admission refuses
	// a command, plan or fleet past them, or past the wire's own limits.
	Limits Limits
	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger
	// SecureCookies marks the dashboard's login cookie Secure even on
	// plain HTTP: for a TLS-terminating proxy in front that does not send
	// X-Forwarded-Proto. Without it, the cookie is Secure over TLS or
	// when X-Forwarded-Proto says https.
	SecureCookies bool
	// TrustedProxies are the proxies (load balancers, a site's NAT) whose
	// X-Forwarded-For names a request's source, for the limit on failed
	// authentications; a request from anywhere else is its peer's.
	TrustedProxies []netip.Prefix
	// OnRevoke, if set, hears of every revocation made here, once the
	// store holds it: in a cluster, to carry it to the other nodes, whose
	// Server.Revoked closes what it covers there.
	OnRevoke func(Revocation)
	// EventsKeepalive is how often an idle task event stream gets an SSE
	// comment, so that proxies and load balancers that drop silent
	// connections keep it open, and clients know it is alive: an
	// api.Client takes a stream silent for api.DefaultEventsIdleTimeout
	// (45 s) as broken. Default 15 s.
	EventsKeepalive time.Duration
}

// Server is the device gateway and operator API. Serve its Handler.
type Server struct {
	cfg       Config
	log       *slog.Logger
	store     *store.Store
	reg       *registry
	disp      *dispatcher
	sessions  *sessionManager
	admission *admission
	metrics   *metrics.Metrics
	keys      *keyLocks // idempotency keys being served
	csrf      *http.CrossOriginProtection
	authLimit *authLimiter
	// revocations close the open surfaces of revoked identities.
	revocations *revocations
	stop        chan struct{}
	stopOnce    sync.Once
	janitor     chan struct{} // closed when the results janitor has stopped
}

// AdminTokenFile is the name of the operator token file in the data dir.
const AdminTokenFile = "admin.token"

// New opens the data dir, creating the database and, on first start, the
// operator token. Sessions and commands that a previous run left
// unfinished are failed with "server restarted".
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.EventsKeepalive = cmp.Or(cfg.EventsKeepalive, 15*time.Second)
	frameCap := cfg.Conn.MaxFrameBytes
	if frameCap <= 0 {
		frameCap = protocol.DefaultMaxFrameBytes
	}
	cfg.Limits.setDefaults(frameCap)
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("server: data dir is required")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("server: data dir: %w", err)
	}
	tokenPath := filepath.Join(cfg.DataDir, AdminTokenFile)
	token, created, err := loadOrCreateAdminToken(tokenPath)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	st, err := store.Open(ctx, filepath.Join(cfg.DataDir, "edgeaip.db"))
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if err := startStore(ctx, st, token, created, tokenPath, cfg.Logger); err != nil {
		st.Close()
		return nil, fmt.Errorf("server: %w", err)
	}
	cfg.Sessions.setDefaults()
	s := &Server{cfg: cfg, log: cfg.Logger, store: st,
		keys: newKeyLocks(cfg.Logger), csrf: http.NewCrossOriginProtection(),
		authLimit: newAuthLimiter(time.Now), revocations: newRevocations(),
		stop: make(chan struct{}), janitor: make(chan struct{})}
	s.reg = newRegistry(cfg.Sessions.DeviceGrace, s.graceEnded)
	s.metrics = metrics.New(metrics.Sources{
		ConnectedDevices: s.reg.deviceCount,
		LiveSessions:     func(state string) int { return s.sessions.liveSessions(state) },
		BlockedSources:   s.authLimit.count,
	})
	s.disp = newDispatcher(st, s.reg, s.metrics, s.log, frameCap)
	s.admission = &admission{limits: cfg.Limits, frameCap: frameCap, inventory: s.disp.inventory}
	s.sessions = newSessionManager(cfg.Sessions, st, s.disp, s.metrics, s.log)
	go func() {
		defer close(s.janitor)
		s.sessions.expireResults(s.stop)
	}()
	return s, nil
}

// startStore readies the store for a server starting: the identity of
// admin.token (token, just written if created), and the end of what the
// last run left running.
func startStore(ctx context.Context, st *store.Store, token string, created bool, tokenPath string, log *slog.Logger) error {
	live, err := bootstrapAdmin(ctx, st, token)
	switch {
	case err != nil:
		return err
	case created:
		log.Info("wrote a new operator token", "path", tokenPath, "identity", bootstrapIdentity)
	case live:
		log.Info("using the operator token", "path", tokenPath)
	default:
		log.Warn("the operator token file holds a token that was rotated or revoked: it does not work", "path", tokenPath)
	}
	return failInterrupted(ctx, st, log)
}

// failInterrupted ends what the last run of the server left running.
func failInterrupted(ctx context.Context, st *store.Store, log *slog.Logger) error {
	var sessions, commands int
	err := st.Write(ctx, func(tx *store.Tx) (err error) {
		sessions, commands, err = tx.FailInterrupted("server restarted")
		return err
	})
	if err != nil {
		return err
	}
	if sessions+commands > 0 {
		log.Warn("failed what the last run left unfinished", "sessions", sessions, "commands", commands, "error", "server restarted")
	}
	return nil
}

// Handler serves /ws, /api, /metrics and the dashboard at /.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", s.serveWS)
	for _, rt := range s.routes() {
		mux.Handle(rt.key(), s.guard(rt.key(), rt.handler))
	}
	dash := dashboard.Handler()
	mux.Handle("GET /{$}", dash)
	mux.Handle("GET /static/", dash)
	return mux
}

// Shutdown cancels the running sessions, which record their end, fails
// the commands still waiting and closes every connection. Call it before
// http.Server.Shutdown, then Close.
func (s *Server) Shutdown() {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.sessions.cancelAll()
		s.disp.shutdown()
		s.sessions.wait()
		<-s.janitor
		s.reg.closeAll()
	})
}

// Close shuts down and closes the database.
func (s *Server) Close() error {
	s.Shutdown()
	return s.store.Close()
}
