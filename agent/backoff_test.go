package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBackoffGrowsToItsCapWithFullJitter(t *testing.T) {
	b := backoff{base: 500 * time.Millisecond, max: 30 * time.Second}
	var seen time.Duration
	for i := range 200 {
		ceil := min(b.max, b.base<<min(i, 30))
		d := b.next()
		assert.Positive(t, d)
		assert.LessOrEqual(t, d, ceil, "attempt %d", i)
		seen = max(seen, d)
	}
	assert.Greater(t, seen, 15*time.Second, "late attempts reach toward the cap")
	b.reset()
	assert.LessOrEqual(t, b.next(), 500*time.Millisecond, "reset starts over")
}
