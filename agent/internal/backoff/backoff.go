// Package backoff spaces out the attempts of something that keeps
// failing: the link's reconnections and the restarts of an MCP server.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Backoff is exponential backoff with full jitter: each wait is uniform in
// [0, min(Max, Base·2^attempt)], so a fleet that lost the server at the
// same moment does not come back at the same moment.
type Backoff struct {
	Base, Max time.Duration
	attempt   int
}

// Next is how long to wait before the next attempt.
func (b *Backoff) Next() time.Duration {
	ceil := b.Max
	if b.attempt < 30 {
		ceil = min(b.Max, b.Base<<b.attempt)
	}
	b.attempt++
	return rand.N(ceil) + 1
}

// Attempt counts the waits since the last Reset.
func (b *Backoff) Attempt() int { return b.attempt }

// Reset starts over from Base.
func (b *Backoff) Reset() { b.attempt = 0 }
