package mcpproxy

import (
	"context"
	"log/slog"
	"sync"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/reply"
)

// Pool owns the agent's MCP servers: one per namespace shared by every
// Computer, except servers with reset: true, of which each Computer gets
// its own, started fresh for it.
type Pool struct {
	ctx      context.Context
	cancel   context.CancelFunc
	cap      reply.Cap
	version  string
	log      *slog.Logger
	onChange func()

	mu      sync.Mutex
	shared  map[string]*Server
	running sync.WaitGroup
}

// NewPool returns a pool of no servers. No tool result may be larger than
// one frame under cap; version is the agent's, which servers are told;
// onChange is called whenever a server's tool list changed.
func NewPool(cap reply.Cap, version string, log *slog.Logger, onChange func()) *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{ctx: ctx, cancel: cancel, cap: cap, version: version, log: log, onChange: onChange, shared: map[string]*Server{}}
}

// Server returns the running server for cfg, starting it if needed: the
// namespace's shared one, or, for reset: true, one of its own.
func (p *Pool) Server(cfg config.MCPServerConfig) *Server {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.shared[cfg.Namespace]; ok && !cfg.Reset {
		return s
	}
	s := newServer(cfg, p.cap, p.version, p.log, p.onChange)
	if !cfg.Reset {
		p.shared[cfg.Namespace] = s
	}
	ctx, cancel := context.WithCancel(p.ctx)
	s.cancel, s.stopped = cancel, make(chan struct{})
	p.running.Go(func() {
		defer close(s.stopped)
		s.run(ctx)
	})
	return s
}

// Close stops every server and waits for them.
func (p *Pool) Close() {
	p.cancel()
	p.running.Wait()
}
