package backoff

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestBackoffGrowsToItsCapWithFullJitter(t *testing.T) {
	b := Backoff{Base: 500 * time.Millisecond, Max: 30 * time.Second}
	var seen time.Duration
	for i := range 200 {
		ceil := min(b.Max, b.Base<<min(i, 30))
		d := b.Next()
		assert.Positive(t, d)
		assert.LessOrEqual(t, d, ceil, "attempt %d", i)
		seen = max(seen, d)
	}
	assert.Equal(t, 200, b.Attempt())
	assert.Greater(t, seen, 15*time.Second, "late attempts reach toward the cap")
	b.Reset()
	assert.LessOrEqual(t, b.Next(), 500*time.Millisecond, "reset starts over")
}
