package tasks

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRecentLogsAreKeptForAWhileAndBoundedInNumber(t *testing.T) {
	var r recentLogs
	t0 := time.Now()
	first := newEventLog("d", nil)
	r.keep("first", first, t0)
	assert.Same(t, first, r.get("first", t0.Add(recentLogsTTL)), "kept for the whole TTL")
	assert.Nil(t, r.get("first", t0.Add(recentLogsTTL+time.Second)), "forgotten after it")

	for i := range recentLogsMax + 1 {
		r.keep(strconv.Itoa(i), newEventLog("d", nil), t0)
	}
	assert.Len(t, r.logs, recentLogsMax)
	assert.Nil(t, r.get("0", t0), "the oldest goes first")
	assert.NotNil(t, r.get(strconv.Itoa(recentLogsMax), t0))
}
