package benchlat

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Run calls each index once, from every worker, and reports both
// percentiles.
func TestRunCallsEveryIndexOnceAndReportsThePercentiles(t *testing.T) {
	var calls []int
	res := testing.Benchmark(func(b *testing.B) {
		calls = make([]int, b.N)
		Run(b, 4, func(i int) error {
			calls[i]++ // each index is one worker's
			time.Sleep(10 * time.Microsecond)
			return nil
		})
	})
	for i, n := range calls {
		assert.Equal(t, 1, n, "index %d", i)
	}
	assert.Contains(t, res.Extra, "p50-µs")
	assert.Contains(t, res.Extra, "p99-µs")
	assert.LessOrEqual(t, res.Extra["p50-µs"], res.Extra["p99-µs"])
}

// A failed call fails the benchmark and reports no latencies.
func TestRunStopsAtAFailureAndReportsNothing(t *testing.T) {
	res := testing.Benchmark(func(b *testing.B) {
		Run(b, 2, func(i int) error {
			if i == 0 {
				return errors.New("refused")
			}
			return nil
		})
	})
	assert.Zero(t, res.N, "a failed benchmark has no result")
	assert.NotContains(t, res.Extra, "p50-µs")
}
