package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/internal/authlimit"
	"github.com/edgeaip/edgeaip/internal/dirlock"
	"github.com/edgeaip/edgeaip/internal/privatedir"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/certs"
	"github.com/edgeaip/edgeaip/server/internal/cluster"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/httpapi"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/internal/mcpgateway"
	"github.com/edgeaip/edgeaip/server/internal/rollouts"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/internal/unrecorded"
	"github.com/edgeaip/edgeaip/server/internal/wsgateway"
	"github.com/edgeaip/edgeaip/server/metrics"
)

// Config configures a Server.
type Config struct {
	// DataDir holds the database and the operator token. It is created
	// with mode 0700 if missing.
	DataDir string
	// Conn tunes client connections (frame cap, ping interval). The
	// server pings only a link silent for its PingInterval and half its
	// PingTimeout, 55 s by default: our agents ping after 50 s of silence
	// themselves, and the server answers. A link silent for 60 s, by
	// default, is dropped as dead.
	Conn protocol.ConnOptions
	// Sessions tunes the session manager: limits, result TTL, device grace.
	Sessions SessionConfig
	// Store tunes the database.
	Store StoreConfig
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
	// Pprof serves Go's profiles (net/http/pprof) under /debug/pprof/, to
	// the operator alone, as /metrics is: they show what the server runs,
	// and a CPU profile costs it while it is taken. Off by default.
	Pprof bool
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
	// TLS names the files of the server's TLS; none: plain HTTP.
	TLS TLSFiles
	// MCP tunes the MCP gateway at /mcp.
	MCP MCPConfig
	// Rollouts tunes the rollouts.
	Rollouts RolloutsConfig
	// Cluster makes the server a node of a cluster; zero: a single node.
	Cluster ClusterConfig
}

// StoreConfig tunes the database. The zero value gives the defaults.
type StoreConfig struct {
	// URL is the PostgreSQL database (postgres://…) that holds the
	// store. Default: SQLite, DataDir/edgeaip.db.
	URL string
	// Readers bounds the database connections that serve reads (API
	// requests, the dashboard); a read beyond them waits for one. Default
	// max(4, 2 × GOMAXPROCS).
	Readers int
	// ReaderIdle closes a reader connection unused this long, with the
	// memory and files it holds. Default 60 s.
	ReaderIdle time.Duration
	// UnrecordedWrites and UnrecordedBytes bound the writes the database
	// could not take (a full disk) that the server keeps, in memory, to
	// retry until it takes them: devices' results, commands' failures,
	// tasks' ends; bytes count what they would record. Past either bound
	// a write is dropped: results stay in their agent's outbox, which
	// sends them again after it next registers, and a task's end is
	// recorded as "server restarted" at the next start. Default 10 000
	// writes and 64 MiB.
	UnrecordedWrites int
	UnrecordedBytes  int64
}

// DatabaseFile is the name of the SQLite database in the data dir.
const DatabaseFile = "edgeaip.db"

// location is where the store is: URL, or the SQLite file in dataDir.
func (c *StoreConfig) location(dataDir string) string {
	if c.URL != "" {
		return c.URL
	}
	return filepath.Join(dataDir, DatabaseFile)
}

func (c *StoreConfig) setDefaults() {
	if c.UnrecordedWrites <= 0 {
		c.UnrecordedWrites = unrecorded.DefaultMaxWrites
	}
	if c.UnrecordedBytes <= 0 {
		c.UnrecordedBytes = unrecorded.DefaultMaxBytes
	}
}

// Server is the device gateway and operator API. Serve its Handler.
type Server struct {
	cfg        Config
	log        *slog.Logger
	lock       *dirlock.Lock // the data dir's, held until Close
	store      *store.Store
	unrecorded *unrecorded.Writes // what the store could not take, to retry
	reg        *dispatch.Registry
	liveness   *protocol.Liveness // checks every link for silence
	devices    *inscope.Enrolled  // enrolled devices, for the command path
	inScope    *inscope.Checker   // what a caller's scope lets it see
	disp       *dispatch.Dispatcher
	ws         *wsgateway.Gateway // GET /ws: device links and constellation clients
	sessions   *tasks.SessionManager
	admission  *tasks.Admission
	tasks      *tasks.FrontDoor // every surface's way to run and start tasks
	rollouts   *rollouts.Engine // keeps devices at their rollouts' revisions
	mcp        *mcpgateway.Gateway
	cluster    *cluster.Cluster // nil: a single node
	draining   atomic.Bool      // Drain has begun
	orphans    chan struct{}    // closed when watchOrphans has stopped (a cluster node's)
	metrics    *metrics.Metrics
	http       *httpapi.API // every route, /ws and /mcp among them
	authLimit  *authlimit.Limiter
	auth       *identity.Authority // who callers and devices are
	stop       chan struct{}
	stopOnce   sync.Once
	closeOnce  sync.Once
	janitor    chan struct{} // closed when the results janitor has stopped
	seenFlush  chan struct{} // closed when the last_seen flusher has stopped
}

// AdminTokenFile is the name of the operator token file in the data dir.
const AdminTokenFile = "admin.token"

// LockFile is the name of the file in the data dir that a running server
// holds locked, with its pid in it.
const LockFile = "aip-server.lock"

// New opens the data dir, creating the database and, on first start, the
// operator token. Sessions and commands that a previous run left
// unfinished are failed with "server restarted". The data dir is the
// server's alone until Close: New fails, having written nothing, if
// another process holds it.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.Store.setDefaults()
	if cfg.Conn.MaxFrameBytes <= 0 {
		cfg.Conn.MaxFrameBytes = protocol.DefaultMaxFrameBytes
	}
	cfg.Limits.SetDefaults(cfg.Conn.MaxFrameBytes)
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("server: data dir is required")
	}
	if cfg.Store.URL != "" && !store.IsPostgresURL(cfg.Store.URL) {
		return nil, fmt.Errorf("server: store %q: want a postgres:// URL, or none for SQLite in the data dir", store.RedactURL(cfg.Store.URL))
	}
	if err := cfg.Cluster.check(cfg.Store); err != nil {
		return nil, err
	}
	// Read before anything is written: a bad file fails the start alone.
	set, err := cfg.TLS.load()
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if err := os.MkdirAll(cfg.DataDir, privatedir.Dir); err != nil {
		return nil, fmt.Errorf("server: data dir: %w", err)
	}
	lock, err := dirlock.Acquire(cfg.DataDir, LockFile)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s, err := openDataDir(ctx, cfg, lock, set)
	if err != nil {
		lock.Release()
		return nil, err
	}
	return s, nil
}

// openDataDir opens the data dir whose lock New holds, for a server with
// the TLS material set (nil: plain HTTP).
func openDataDir(ctx context.Context, cfg Config, lock *dirlock.Lock, set *certs.Set) (*Server, error) {
	tokenPath := filepath.Join(cfg.DataDir, AdminTokenFile)
	token, created, err := identity.LoadOrCreateAdminToken(tokenPath)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	st, err := store.Open(ctx, cfg.Store.location(cfg.DataDir),
		store.Options{Readers: cfg.Store.Readers, ReaderIdle: cfg.Store.ReaderIdle})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	cfg.Logger.Info("store open", "backend", st.Backend())
	privatedir.Warn(cfg.DataDir, cfg.Logger)
	cfg.Sessions.SetDefaults()
	s := &Server{cfg: cfg, log: cfg.Logger, lock: lock, store: st, authLimit: authlimit.NewLimiter(cfg.TrustedProxies, time.Now, cfg.Logger),
		stop: make(chan struct{}), janitor: make(chan struct{}), seenFlush: make(chan struct{}),
		liveness: protocol.NewLiveness()}
	s.auth = identity.New(identity.Config{Store: st, Certs: set, DeviceCertValidity: cfg.TLS.DeviceCertValidity, Logger: cfg.Logger,
		OnRotationSettled: func(id string) { s.tellCluster(id, cluster.DeviceRotationSettled) }})
	if err := s.joinCluster(ctx); err != nil {
		st.Close()
		return nil, err
	}
	if err := startStore(ctx, st, token, created, tokenPath, cfg.Logger, s.cluster == nil); err != nil {
		s.leaveCluster()
		st.Close()
		return nil, fmt.Errorf("server: %w", err)
	}
	s.reg = dispatch.NewRegistry(cfg.Sessions.DeviceGrace, func(id string) { s.ws.GraceEnded(id) })
	s.devices = inscope.NewEnrolled(st)
	s.metrics = metrics.New(metrics.Sources{
		ConnectedDevices:   s.reg.DeviceCount,
		LiveSessions:       func(state string) int { return s.sessions.LiveSessions(state) },
		BlockedSources:     s.authLimit.Refused,
		StoreWriteFailures: st.WriteFailures,
		UnrecordedWrites:   func() int { n, _ := s.unrecorded.Pending(); return n },
	})
	frameCap := cfg.Conn.MaxFrameBytes
	s.unrecorded = unrecorded.New(st, cfg.Store.UnrecordedWrites, cfg.Store.UnrecordedBytes, s.metrics.UnrecordedDropped, s.log)
	answerRecorded := func(deviceID string, m *protocol.ClientMessage, err error) { s.ws.AnswerRecorded(deviceID, m, err) }
	s.disp = dispatch.NewDispatcher(st, s.unrecorded, s.reg, s.metrics, answerRecorded, tasks.CommandSessionEnd, s.log, frameCap,
		cfg.Sessions.PreparationBound)
	s.admission = tasks.NewAdmission(cfg.Limits, frameCap, s.disp)
	s.sessions = tasks.NewSessionManager(cfg.Sessions, s.owner, st, s.unrecorded, s.disp, s.metrics, s.log)
	s.tasks = tasks.NewFrontDoor(s.admission, s.sessions, func(ctx context.Context, sel access.Selector) ([]string, error) {
		return st.Devices().Matching(ctx, sel, 0)
	})
	s.inScope = inscope.NewChecker(st, s.devices, s.disp, s.tasks, s.log)
	s.mcp = mcpgateway.New(mcpgateway.Config{Tasks: s.tasks, InScope: s.inScope, Devices: s.devices, Store: st, Auth: s.auth,
		Registry: s.reg, Metrics: s.metrics, Logger: s.log, MaxMessageBytes: frameCap, MaxPlanBytes: cfg.Limits.MaxPlanBytes, Options: cfg.MCP})
	s.ws = wsgateway.New(wsgateway.Config{Store: st, Registry: s.reg, Dispatcher: s.disp, Sessions: s.sessions, Tasks: s.tasks,
		InScope: s.inScope, Auth: s.auth, AuthLimit: s.authLimit, Metrics: s.metrics, Logger: s.log, Conn: cfg.Conn,
		Liveness: s.liveness, MaxPlanBytes: cfg.Limits.MaxPlanBytes, RefuseWhileDraining: s.refuseWhileDraining,
		AuthFailed: s.authFailed, TooManyFailures: s.tooManyFailures, DevicesChanged: s.mcp.DevicesChanged,
		DeviceLinked: s.deviceRegistered})
	s.rollouts = s.newRollouts()
	s.rolloutMetrics()
	s.http = s.newHTTPAPI()
	if err := s.linkCluster(); err != nil {
		s.leaveCluster()
		st.Close()
		return nil, err
	}
	if err := s.rollouts.Start(ctx); err != nil {
		s.log.Error("rollouts not resumed; they resume on their next event", "err", err)
	}
	go s.mcp.RefreshViews()
	go func() {
		defer close(s.janitor)
		s.sessions.ExpireResults(s.stop)
	}()
	go func() {
		defer close(s.seenFlush)
		s.ws.FlushLastSeen(s.stop)
	}()
	if s.cluster != nil {
		s.orphans = make(chan struct{})
		go func() {
			defer close(s.orphans)
			s.watchOrphans(s.stop, cmp.Or(cfg.Cluster.DeadAfter, cluster.DefaultDeadAfter))
		}()
	}
	return s, nil
}

// startStore readies the store for a server starting: the identity of
// admin.token (token, just written if created), and, for a single node
// (alone), the end of what the last run left running. On a store that
// other nodes share, what is unfinished may be theirs, running: a dead
// node's work is ended or adopted by the node that finds it dead
// (cluster.OnDead).
func startStore(ctx context.Context, st *store.Store, token string, created bool, tokenPath string, log *slog.Logger, alone bool) error {
	live, err := identity.BootstrapAdmin(ctx, st, token)
	switch {
	case err != nil:
		return err
	case created:
		log.Info("wrote a new operator token", "path", tokenPath, "identity", identity.BootstrapIdentity)
	case live:
		log.Info("using the operator token", "path", tokenPath)
	default:
		log.Warn("the operator token file holds a token that was rotated or revoked: it does not work", "path", tokenPath)
	}
	if !alone {
		return nil
	}
	return failInterrupted(ctx, st, log)
}

// failInterrupted ends what the last run of the single node left running.
func failInterrupted(ctx context.Context, st *store.Store, log *slog.Logger) error {
	var sessions, commands int
	err := st.Write(ctx, func(tx *store.Tx) (err error) {
		sessions, commands, err = tx.Sessions().FailInterrupted("server restarted")
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

// Shutdown cancels the running sessions, which record their end, fails
// the commands still waiting and closes every connection. Call it before
// http.Server.Shutdown, then Close.
func (s *Server) Shutdown() {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.mcp.Close()
		if s.orphans != nil {
			<-s.orphans // adopts nothing more
		}
		s.rollouts.Stop()
		s.sessions.CancelAll()
		s.disp.Shutdown()
		s.sessions.Wait()
		s.rollouts.Wait()
		<-s.janitor
		<-s.seenFlush
		s.unrecorded.Close()
		s.ws.RecordLastSeen(context.Background(), s.reg.Devices())
		// Gone from the cluster before the links close: the other nodes
		// then take this node's devices as between links, which they are,
		// not offline, as this node would answer once its graces end.
		s.leaveCluster()
		s.reg.CloseAll(websocket.StatusGoingAway, "server shutting down")
		s.liveness.Close()
	})
}

// Close shuts down, closes the database and releases the data dir.
func (s *Server) Close() error {
	s.Shutdown()
	err := s.store.Close()
	s.closeOnce.Do(func() { err = errors.Join(err, s.lock.Release()) })
	return err
}
