package cluster

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A rollout event reaches the other nodes, not its sender; one that
// names neither a rollout nor a device, or both, or a rollout by a name
// no rollout has, is logged and dropped.
func TestRolloutEventsReachTheOtherNodesAndMalformedOnesAreDropped(t *testing.T) {
	e := newEnv(t)
	a, log := e.joinLogged("a")
	b := e.mustJoin("b")
	var mu sync.Mutex
	var heard []RolloutEvent
	hear := func(ev RolloutEvent) { mu.Lock(); heard = append(heard, ev); mu.Unlock() }
	require.NoError(t, a.OnRolloutEvent(hear))
	require.NoError(t, b.OnRolloutEvent(hear))
	require.NoError(t, a.nc.Flush())
	require.NoError(t, b.nc.Flush())
	bad := []struct{ data, want string }{
		{`{"from":"b"}`, `fields \"rollout\" and \"device_id\": want one of them`},
		{`{"from":"b","rollout":"r","device_id":"k"}`, `want one of them`},
		{`{"from":"b","rollout":"a.b"}`, `field \"rollout\": \"a.b\": not a rollout's name`},
		{`{"from":"b>","device_id":"k"}`, `field \"from\": node id \"b>\"`},
	}
	for _, m := range bad {
		publishRaw(t, b.nc, rolloutSubject, []byte(m.data))
	}
	require.NoError(t, b.PublishRolloutEvent(RolloutEvent{Rollout: "kiosk"}))
	require.NoError(t, b.PublishRolloutEvent(RolloutEvent{DeviceID: "k.1"}))
	want := []RolloutEvent{{From: "b", Rollout: "kiosk"}, {From: "b", DeviceID: "k.1"}}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(heard) >= len(want) }, 5*time.Second, 10*time.Millisecond)
	mu.Lock()
	assert.Equal(t, want, heard, "a hears both, in order; b, which sent them, neither")
	mu.Unlock()
	for _, m := range bad {
		assert.Contains(t, log.String(), m.want)
	}
}

func FuzzDecodeRolloutEvent(f *testing.F) {
	fuzzDecode(f, RolloutEvent{From: "a", Rollout: "kiosk-tools"}, RolloutEvent{From: "a", DeviceID: "kiosk.1"})
}
