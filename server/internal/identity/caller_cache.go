package identity

import (
	"sync"
	"time"
)

// callerCache keeps the callers that operator tokens authenticated, by
// the token's hash, so that a request need not read its token from the
// store (RATIONALE.md, "Revocation within a second"). What makes a token
// stop working reaches it: a revocation, carried by Authority.Revoked, drops
// its identity's entries at once; a token's expiry is checked on every
// hit; and an entry is read again from the store after ttl, which bounds
// how long a change the cache was not told of (a cluster's message lost)
// goes unseen.
type callerCache struct {
	ttl time.Duration
	max int

	mu sync.Mutex
	// gen counts the revocations: a caller read from the store while one
	// happened may be the revoked one, and is not kept.
	gen     uint64
	entries map[string]cachedCaller
}

type cachedCaller struct {
	c *Caller
	// expires is the token's own expiry, zero if it has none.
	expires time.Time
	// until is when the entry is read from the store again.
	until time.Time
}

func newCallerCache(ttl time.Duration, max int) *callerCache {
	return &callerCache{ttl: ttl, max: max, entries: map[string]cachedCaller{}}
}

// get returns the caller of the token whose hash is hash, if kept and
// still good at now; else the generation to hand put with what the store
// says.
func (cc *callerCache) get(hash string, now time.Time) (c *Caller, gen uint64) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	e, ok := cc.entries[hash]
	switch {
	case !ok:
		return nil, cc.gen
	case now.After(e.until) || (!e.expires.IsZero() && !now.Before(e.expires)):
		delete(cc.entries, hash)
		return nil, cc.gen
	}
	return e.c, cc.gen
}

// put keeps c, the caller of the token whose hash is hash and which
// expires at expires (zero: never), as read from the store after get
// returned gen: not if a revocation came meanwhile.
func (cc *callerCache) put(hash string, c *Caller, expires time.Time, gen uint64, now time.Time) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if gen != cc.gen {
		return
	}
	if len(cc.entries) >= cc.max {
		clear(cc.entries)
	}
	cc.entries[hash] = cachedCaller{c: c, expires: expires, until: now.Add(cc.ttl)}
}

// forget drops every token of identity: the next request with one reads
// the store, which has the revocation.
func (cc *callerCache) forget(identity string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.gen++
	for hash, e := range cc.entries {
		if e.c.Name == identity {
			delete(cc.entries, hash)
		}
	}
}
