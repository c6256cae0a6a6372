package server

import (
	"context"
	"net/http"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The command path finds an enrolled device in memory: once looked up,
// it is not read from the store again, until it is enrolled, revoked or
// enrolled again with other labels, each of which the cache hears of.
func TestTheDeviceCacheFollowsEnrollmentRevocationAndLabels(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	_, err := ts.api.Enroll(ctx, api.EnrollRequest{ID: "kiosk", Labels: map[string]string{"site": "lobby"}})
	require.NoError(t, err)
	d, err := ts.srv.devices.Get(ctx, "kiosk")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"site": "lobby"}, d.Labels)

	// Behind the cache's back, as nothing in the server does: the cached
	// entry stands, so the lookup did not read the store.
	require.NoError(t, ts.srv.store.Write(ctx, func(tx *store.Tx) error { return tx.Devices().Delete("kiosk") }))
	d, err = ts.srv.devices.Get(ctx, "kiosk")
	require.NoError(t, err, "a cached device is not read from the store again")
	assert.Equal(t, "kiosk", d.ID)

	// Enrolled again, with other labels, while the cache still holds the
	// old entry: enrolling forgets it, so the lookup sees the new labels.
	_, err = ts.api.Enroll(ctx, api.EnrollRequest{ID: "kiosk", Labels: map[string]string{"site": "hall"}})
	require.NoError(t, err)
	d, err = ts.srv.devices.Get(ctx, "kiosk")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"site": "hall"}, d.Labels)

	// Revoked through the API: a command finds it gone at once.
	require.NoError(t, ts.api.Revoke(ctx, "kiosk"))
	code, msg := ts.apiStatus(http.MethodPost, "/api/devices/kiosk/commands",
		api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "5s"})
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, msg, `device "kiosk" is not enrolled`)
}

// A device not enrolled is not cached: enrolling it is found by the next
// lookup even if the cache were not told.
func TestTheDeviceCacheKeepsNoAbsentDevice(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	_, err := ts.srv.devices.Get(ctx, "late")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, ts.srv.store.Write(ctx, func(tx *store.Tx) error { return tx.Devices().Create("late", "hash", nil) }))
	_, err = ts.srv.devices.Get(ctx, "late")
	assert.NoError(t, err)
}
