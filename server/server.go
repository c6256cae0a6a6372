package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// Config configures a Server.
type Config struct {
	// DataDir holds the database and the operator token. It is created
	// with mode 0700 if missing.
	DataDir string
	// Conn tunes device connections (frame cap, ping interval).
	Conn protocol.ConnOptions
	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger
}

// Server is the device gateway and operator API. Serve its Handler.
type Server struct {
	cfg       Config
	log       *slog.Logger
	store     *store.Store
	reg       *registry
	disp      *dispatcher
	adminHash string
	stop      chan struct{}
	stopOnce  sync.Once
}

// AdminTokenFile is the name of the operator token file in the data dir.
const AdminTokenFile = "admin.token"

// New opens the data dir, creating the database and, on first start, the
// operator token.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("server: data dir is required")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("server: data dir: %w", err)
	}
	tokenPath := filepath.Join(cfg.DataDir, AdminTokenFile)
	hash, created, err := loadOrCreateAdminToken(tokenPath)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if created {
		cfg.Logger.Info("wrote a new operator token", "path", tokenPath)
	} else {
		cfg.Logger.Info("using the operator token", "path", tokenPath)
	}
	st, err := store.Open(ctx, filepath.Join(cfg.DataDir, "edgeaip.db"))
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, store: st, reg: newRegistry(), adminHash: hash, stop: make(chan struct{})}
	s.disp = newDispatcher(st, s.reg, s.log, s.stop)
	return s, nil
}

// Handler serves /ws and /api.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws", s.serveWS)
	s.routeAPI(mux)
	return mux
}

// Shutdown fails the commands still waiting and closes every device
// connection. Call it before http.Server.Shutdown, then Close.
func (s *Server) Shutdown() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.reg.closeAll()
}

// Close closes the database.
func (s *Server) Close() error {
	s.Shutdown()
	return s.store.Close()
}
