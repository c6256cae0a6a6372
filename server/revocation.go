package server

import (
	"slices"
	"sync"

	"github.com/edgeaip/edgeaip/server/internal/cluster"
)

// Revocation is an identity, or some of its tokens, that stopped working:
// revoked, or at the end of a rotation's grace. The store already refuses
// them to every new request; the open surfaces they authenticated (event
// streams, constellation links, MCP requests) close when they hear of it. In a cluster
// each node hears of it: Config.OnRevoke carries it out, and
// Server.Revoked takes it in.
type Revocation struct {
	Identity string
	// TokenIDs are the tokens that stopped; empty: all of the identity's.
	TokenIDs []string
}

// covers reports whether the revocation ends what c opened.
func (v Revocation) covers(c *caller) bool {
	return v.Identity == c.name && (len(v.TokenIDs) == 0 || slices.Contains(v.TokenIDs, c.tokenID))
}

// revocations tells the open surfaces of a caller when it is revoked.
type revocations struct {
	mu      sync.Mutex
	watches map[*revocationWatch]struct{}
}

// revocationWatch is one open surface's: ended is closed when its
// caller is revoked.
type revocationWatch struct {
	c     *caller
	ended chan struct{}
}

func newRevocations() *revocations {
	return &revocations{watches: map[*revocationWatch]struct{}{}}
}

// watch returns a channel closed when c is revoked, and a function that
// stops watching, which the surface calls when it closes.
func (r *revocations) watch(c *caller) (ended <-chan struct{}, stop func()) {
	w := &revocationWatch{c: c, ended: make(chan struct{})}
	r.mu.Lock()
	r.watches[w] = struct{}{}
	r.mu.Unlock()
	return w.ended, func() {
		r.mu.Lock()
		delete(r.watches, w)
		r.mu.Unlock()
	}
}

// publish ends every watch v covers, and reports how many.
func (r *revocations) publish(v Revocation) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for w := range r.watches {
		if v.covers(w.c) {
			close(w.ended)
			delete(r.watches, w)
			n++
		}
	}
	return n
}

// Revoked closes the open surfaces v covers: for a revocation made on
// another node of a cluster, which Config.OnRevoke carried here.
func (s *Server) Revoked(v Revocation) {
	s.mcp.revoked(v)
	if n := s.revocations.publish(v); n > 0 {
		s.log.Info("closed what a revoked identity had open", "identity", v.Identity, "tokens", v.TokenIDs, "surfaces", n)
	}
}

// publishRevocation closes the open surfaces v covers here, and hands
// it to Config.OnRevoke, for the rest of a cluster: the store already
// refuses it to new requests.
func (s *Server) publishRevocation(v Revocation) {
	s.Revoked(v)
	if s.cfg.OnRevoke != nil {
		s.cfg.OnRevoke(v)
	}
	if s.cluster == nil {
		return
	}
	if err := s.cluster.PublishRevocation(cluster.Revocation{Identity: v.Identity, TokenIDs: v.TokenIDs}); err != nil {
		s.log.Error("cluster: other nodes not told of a revocation; the store refuses its tokens there, but what they opened stays open", "identity", v.Identity, "err", err)
	}
}
