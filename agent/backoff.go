package agent

import (
	"math/rand/v2"
	"time"
)

// backoff is exponential backoff with full jitter: each wait is uniform in
// [0, min(max, base·2^attempt)], so a fleet that lost the server at the same
// moment does not come back at the same moment.
type backoff struct {
	base, max time.Duration
	attempt   int
}

func (b *backoff) next() time.Duration {
	ceil := b.max
	if b.attempt < 30 {
		ceil = min(b.max, b.base<<b.attempt)
	}
	b.attempt++
	return rand.N(ceil) + 1
}

func (b *backoff) reset() { b.attempt = 0 }
