package mcpgateway

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An identity's calls are held to perMinute in any minute, saying when to
// try again, and to atOnce running: a call that ends frees its place.
func TestCallLimitsRefuseCallsPastEitherLimit(t *testing.T) {
	l := newCallLimits(3, 2)
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	first, _, err := l.take(start)
	require.NoError(t, err)
	second, _, err := l.take(start.Add(time.Second))
	require.NoError(t, err)

	_, limit, err := l.take(start.Add(2 * time.Second))
	assert.Equal(t, "at_once", limit)
	assert.EqualError(t, err, "over the limit of 2 calls at once for this identity: wait for one to end")

	first()
	third, _, err := l.take(start.Add(3 * time.Second))
	require.NoError(t, err)
	second()
	third()

	_, limit, err = l.take(start.Add(20 * time.Second))
	assert.Equal(t, "per_minute", limit)
	assert.EqualError(t, err, "over the limit of 3 calls a minute for this identity: try again in 40s")

	release, _, err := l.take(start.Add(time.Minute))
	require.NoError(t, err, "the first call is a minute old")
	release()
}
