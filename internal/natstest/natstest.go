// Package natstest runs a real NATS server (github.com/nats-io/nats-server/v2)
// in-process on loopback, for tests of cluster mode and for cmd-less
// setups such as the e2e harness's (internal/natstest/natsd). Debian's
// nats-server is too old to rely on (2.9); this is the current server.
package natstest

import (
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

	mu  sync.Mutex
	srv *server.Server
}

// Run starts a server on 127.0.0.1:port (0: a free port).
func Run(port int) (*Server, error) {
	if port == 0 {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		port = p
	}
	s := &Server{port: port}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts it, after Stop, on its port.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: s.port, NoLog: true, NoSigs: true})
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
	s, err := Run(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's nats:// URL.
func (s *Server) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

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
