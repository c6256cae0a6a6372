package server

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The rollout metrics are what the store holds at the scrape: a rollout
// over three devices that are offline has its canary waiting for its link
// and the others pending, then it is paused; a rollout that picks no
// device has series of zeros.
func TestAScrapeCountsEachRolloutsDevicesByStateWithItsStateAndRevision(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	for _, id := range []string{"kiosk-1", "kiosk-2", "kiosk-3"} {
		ts.enrollLabelled(id, map[string]string{"site": "lobby"})
	}
	ts.enrollLabelled("depot-1", map[string]string{"site": "depot"})
	wasm, err := os.ReadFile("../testdata/tools/signed/signed_echo.wasm")
	require.NoError(t, err)
	mod, err := ts.api.PutModule(ctx, wasm)
	require.NoError(t, err)
	apply := func(name, selector string) {
		spec, err := json.Marshal(map[string]any{"name": name, "selector": selector, "tools": []string{mod.SHA256}, "waves": []any{1, "100%"}})
		require.NoError(t, err)
		_, err = ts.api.ApplyRollout(ctx, spec)
		require.NoError(t, err)
	}
	apply("kiosk-tools", "site=lobby")
	require.Eventually(t, func() bool {
		fams := ts.scrape()
		return metric(t, fams, "edgeaip_rollout_devices", "rollout", "kiosk-tools", "state", "waiting") == 1 &&
			metric(t, fams, "edgeaip_rollout_devices", "rollout", "kiosk-tools", "state", "pending") == 2
	}, 10*time.Second, 10*time.Millisecond)
	fams := ts.scrape()
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_rollout_revision", "rollout", "kiosk-tools"))
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_rollout_state", "rollout", "kiosk-tools", "state", "rolling"))
	assert.Equal(t, 0.0, metric(t, fams, "edgeaip_rollout_state", "rollout", "kiosk-tools", "state", "paused"))
	assert.Equal(t, 0.0, metric(t, fams, "edgeaip_rollout_devices", "rollout", "kiosk-tools", "state", "done"))

	_, err = ts.api.ControlRollout(ctx, "kiosk-tools", "pause")
	require.NoError(t, err)
	apply("nowhere", "site=nowhere")
	require.Eventually(t, func() bool {
		return metric(t, ts.scrape(), "edgeaip_rollout_state", "rollout", "nowhere", "state", "done") == 1
	}, 10*time.Second, 10*time.Millisecond)
	fams = ts.scrape()
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_rollout_state", "rollout", "kiosk-tools", "state", "paused"))
	assert.Equal(t, 0.0, metric(t, fams, "edgeaip_rollout_state", "rollout", "kiosk-tools", "state", "rolling"))
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_rollout_devices", "rollout", "kiosk-tools", "state", "waiting"))
	for _, state := range []string{"pending", "waiting", "changing", "done", "failed", "removing", "drift"} {
		assert.Equal(t, 0.0, metric(t, fams, "edgeaip_rollout_devices", "rollout", "nowhere", "state", state), state)
	}
}
