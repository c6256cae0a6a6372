// Package natstest runs a real NATS server (github.com/nats-io/nats-server/v2)
// in-process on loopback, for tests of cluster mode and for cmd-less
// setups such as the e2e harness's (internal/natstest/natsd). Debian's
// nats-server is too old to rely on (2.9); this is the current server.
package natstest

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is a NATS server on 127.0.0.1, which can be stopped and started
// again on the same port.
type Server struct {
	port int
	opts Options

	mu  sync.Mutex
	srv *server.Server
}

// Options are what a server asks of its clients beyond the NATS
// protocol; none by default.
type Options struct {
	// User and Password, if set, are the credentials it lets in, and no
	// client without them.
	User, Password string
	// TLS, if set, is its TLS configuration: it takes only TLS clients
	// (tls:// URLs).
	TLS *tls.Config
	// PingInterval, if set, is how often it pings each client; it drops a
	// client, and what the client listens for, with two pings unanswered.
	PingInterval time.Duration
}

// Run starts a server on 127.0.0.1:port (0: a free port).
func Run(port int) (*Server, error) { return RunWith(port, Options{}) }

// RunWith starts a server on 127.0.0.1:port (0: a free port) that asks
// opts of its clients.
func RunWith(port int, opts Options) (*Server, error) {
	if port == 0 {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		port = p
	}
	s := &Server{port: port, opts: opts}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts it, after Stop, on its port.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: s.port, NoLog: true, NoSigs: true,
		Username: s.opts.User, Password: s.opts.Password, TLS: s.opts.TLS != nil, TLSConfig: s.opts.TLS,
		PingInterval: s.opts.PingInterval, MaxPingsOut: 2})
	if err != nil {
		return fmt.Errorf("natstest: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("natstest: server on port %d not ready within 10s", s.port)
	}
	s.srv = srv
	return nil
}

// Start runs a server for t, stopped when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith runs a server for t that asks opts of its clients, stopped
// when t ends.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := RunWith(0, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's URL, without credentials: tls:// if it asks for
// TLS, else nats://.
func (s *Server) URL() string {
	scheme := "nats"
	if s.opts.TLS != nil {
		scheme = "tls"
	}
	return scheme + "://127.0.0.1:" + strconv.Itoa(s.port)
}

// Stop shuts the server down, closing every client's connection; Start
// starts it again.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// freePort is a port free on 127.0.0.1 now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("natstest: free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
