package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMostAtOnceCountsCallsThatShareAMoment(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		runs []interval
		want int
	}{
		{"all together", []interval{{0, 10 * ms}, {1 * ms, 9 * ms}, {2 * ms, 11 * ms}}, 3},
		{"two slots, as the defaults gave", []interval{{0, 4 * ms}, {0, 4 * ms}, {4 * ms, 8 * ms}, {4 * ms, 8 * ms}}, 2},
		{"one after another", []interval{{0, 1 * ms}, {1 * ms, 2 * ms}, {2 * ms, 3 * ms}}, 1},
		{"staggered", []interval{{0, 30 * ms}, {20 * ms, 50 * ms}, {40 * ms, 70 * ms}}, 2},
		{"a slot handed on, the results back 2 ms apart", []interval{{0, 102 * ms}, {100 * ms, 200 * ms}}, 1},
	} {
		assert.Equal(t, c.want, mostAtOnce(c.runs), c.name)
	}
}

func TestReportFailsWhenAFigureIsOverItsBudget(t *testing.T) {
	var within report
	within.startup("warm start", 900*time.Millisecond)
	within.idleRSS("idle", rssReadings{14 << 10, 30 << 10, 15 << 10})
	within.busy(busyFigures{peak: 100 << 10, overlapped: concurrentCalls})
	assert.NoError(t, within.err(), "a single high reading is not the median")

	var over report
	over.startup("warm start", 1100*time.Millisecond)
	over.idleRSS("idle", rssReadings{19.5 * 1024, 19.5 * 1024, 19.5 * 1024})
	over.busy(busyFigures{peak: 100 << 10, overlapped: 2})
	over.sizes(t.TempDir())
	err := over.err()
	if assert.Error(t, err) {
		for _, what := range []string{"warm start: 1.1s", "idle: 19.5 MiB", "2 ran at once", "aip-agent-linux-arm64: not built"} {
			assert.Contains(t, err.Error(), what)
		}
	}
}

func TestSnapshotMappingsAreSummedFromSmaps(t *testing.T) {
	smaps := `7f0000000000-7f0000310000 rw-p 00000000 00:01 1234                       /memfd:aip-snapshot (deleted)
Size:               3136 kB
Rss:                 800 kB
Pss:                 450 kB
Shared_Dirty:        700 kB
Private_Dirty:       100 kB
Anonymous:           100 kB
7f0000310000-7f0004000000 rw-p 00000000 00:00 0
Size:              62400 kB
Rss:                  64 kB
Pss:                  64 kB
Private_Dirty:        64 kB
Anonymous:            64 kB
7f0100000000-7f0100310000 rw-p 00000000 00:01 1234                       /memfd:aip-snapshot (deleted)
Size:               3136 kB
Rss:                 600 kB
Pss:                 320 kB
Shared_Dirty:        560 kB
Private_Dirty:        40 kB
Anonymous:            40 kB
7f0200000000-7f0200310000 r--s 00000000 00:01 1234                       /memfd:aip-snapshot (deleted)
Size:               3136 kB
Rss:                 200 kB
Pss:                  70 kB
`
	m, err := parseSnapshotMappings(strings.NewReader(smaps))
	require.NoError(t, err)
	assert.Equal(t, snapshotMappings{count: 2, size: 6272, rss: 1400, written: 140, pss: 770}, m)
}
