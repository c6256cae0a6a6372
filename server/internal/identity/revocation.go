package identity

import (
	"slices"
	"sync"
)

// Revocation is an identity, or some of its tokens, that stopped working:
// revoked, or at the end of a rotation's grace. The store already refuses
// them to every new request; the open surfaces they authenticated (event
// streams, constellation links, MCP requests) close when they hear of it.
// In a cluster each node hears of it: the server's Config.OnRevoke carries
// it out, and its Server.Revoked takes it in.
type Revocation struct {
	// Identity is the identity's name.
	Identity string
	// TokenIDs are the tokens that stopped; empty: all of the identity's.
	TokenIDs []string
}

// Covers reports whether the revocation ends what identity opened with
// its token tokenID.
func (v Revocation) Covers(identity, tokenID string) bool {
	return v.Identity == identity && (len(v.TokenIDs) == 0 || slices.Contains(v.TokenIDs, tokenID))
}

// revocations tells the open surfaces of a caller when it is revoked.
type revocations struct {
	mu      sync.Mutex
	watches map[*revocationWatch]struct{}
}

// revocationWatch is one open surface's: ended is closed when its
// caller is revoked.
type revocationWatch struct {
	c     *Caller
	ended chan struct{}
}

func newRevocations() *revocations {
	return &revocations{watches: map[*revocationWatch]struct{}{}}
}

// watch returns a channel closed when c is revoked, and a function that
// stops watching, which the surface calls when it closes.
func (r *revocations) watch(c *Caller) (ended <-chan struct{}, stop func()) {
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
		if v.Covers(w.c.Name, w.c.TokenID) {
			close(w.ended)
			delete(r.watches, w)
			n++
		}
	}
	return n
}

// Watch returns a channel closed when c is revoked, and a function that
// stops watching, which the surface c opened calls when it closes.
func (a *Authority) Watch(c *Caller) (ended <-chan struct{}, stop func()) {
	return a.revocations.watch(c)
}

// Revoked makes v act here: the identity's tokens are read from the store
// again by the next request that carries one, and the surfaces opened
// with those v covers, which Watch watches, close.
func (a *Authority) Revoked(v Revocation) {
	a.callers.forget(v.Identity)
	if n := a.revocations.publish(v); n > 0 {
		a.log.Info("closed what a revoked identity had open", "identity", v.Identity, "tokens", v.TokenIDs, "surfaces", n)
	}
}

// ForgetCallers drops identity's tokens from the cache of callers: the
// next request with one reads the store, which has what changed.
func (a *Authority) ForgetCallers(identity string) { a.callers.forget(identity) }
