package eventlog

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRecentLogsAreKeptForAWhileAndBoundedInNumber(t *testing.T) {
	var r Recent
	t0 := time.Now()
	first := New("d", nil)
	r.Keep("first", first, t0)
	assert.Same(t, first, r.Get("first", t0.Add(recentTTL)), "kept for the whole TTL")
	assert.Nil(t, r.Get("first", t0.Add(recentTTL+time.Second)), "forgotten after it")

	for i := range recentMax + 1 {
		r.Keep(strconv.Itoa(i), New("d", nil), t0)
	}
	assert.Len(t, r.logs, recentMax)
	assert.Nil(t, r.Get("0", t0), "the oldest goes first")
	assert.NotNil(t, r.Get(strconv.Itoa(recentMax), t0))
}
