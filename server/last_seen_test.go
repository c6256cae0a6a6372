package server

import (
	"context"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// last_seen is when the device's link was last heard from, any frame or
// ping: the API shows it from the link while the device is online, and
// the store holds it once the link has ended, with no durable write per
// heartbeat.
func TestLastSeenIsWhenTheLinkWasLastHeard(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	rc := ts.device("kiosk")
	registered, err := ts.srv.store.Devices().Get(ctx, "kiosk")
	require.NoError(t, err)
	require.False(t, registered.LastSeen.IsZero(), "registration records it")

	before := time.Now()
	rc.ping() // a heartbeat, heard; nothing written for it
	stored, err := ts.srv.store.Devices().Get(ctx, "kiosk")
	require.NoError(t, err)
	assert.Equal(t, registered.LastSeen, stored.LastSeen, "a heartbeat is not a write")
	dev, err := ts.api.Device(ctx, "kiosk")
	require.NoError(t, err)
	require.NotNil(t, dev.LastSeen)
	assert.False(t, dev.LastSeen.Before(before), "the API shows the link's last frame: %s, before %s", dev.LastSeen, before)
	heard := *dev.LastSeen

	// The periodic flush writes it for online devices, once.
	ts.srv.ws.RecordLastSeen(ctx, ts.srv.reg.Devices())
	stored, err = ts.srv.store.Devices().Get(ctx, "kiosk")
	require.NoError(t, err)
	assert.True(t, stored.LastSeen.Equal(heard), "flushed: %s, heard %s", stored.LastSeen, heard)

	// The link's end writes it too; the device, offline, shows the store's.
	before = time.Now()
	rc.ping()
	rc.conn.CloseNow()
	require.Eventually(t, func() bool {
		d, err := ts.srv.store.Devices().Get(ctx, "kiosk")
		return err == nil && !d.LastSeen.Before(before)
	}, 10*time.Second, 5*time.Millisecond, "the end of the link records when it was last heard")
	require.Eventually(t, func() bool { return ts.srv.reg.Device("kiosk") == nil }, 10*time.Second, 5*time.Millisecond)
	dev, err = ts.api.Device(ctx, "kiosk")
	require.NoError(t, err)
	require.NotNil(t, dev.LastSeen)
	assert.False(t, dev.LastSeen.Before(before), "offline: %s, last heard after %s", dev.LastSeen, before)
	assert.False(t, dev.Online)
}

// A stored last_seen only moves forward: a late flush of an older time
// does not undo a newer one.
func TestStoredLastSeenOnlyMovesForward(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	ts.enroll("kiosk")
	now := time.Now()
	set := func(at time.Time) {
		require.NoError(t, ts.srv.store.WriteUnsynced(ctx, func(tx *store.Tx) error { return tx.Devices().SetLastSeen("kiosk", at) }))
	}
	set(now)
	set(now.Add(-time.Minute))
	d, err := ts.srv.store.Devices().Get(ctx, "kiosk")
	require.NoError(t, err)
	assert.True(t, d.LastSeen.Equal(now), "got %s, want %s", d.LastSeen, now)
}
