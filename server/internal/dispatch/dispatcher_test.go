package dispatch

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/unrecorded"
	"github.com/edgeaip/edgeaip/server/metrics"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newTestDispatcher is a dispatcher on a fresh SQLite store, whose
// single commands' sessions end as completed with their results.
func newTestDispatcher(t *testing.T) (*Dispatcher, *Registry, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "edgeaip.db"), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.DiscardHandler)
	u := unrecorded.New(st, unrecorded.DefaultMaxWrites, unrecorded.DefaultMaxBytes, func() {}, log)
	t.Cleanup(u.Close)
	reg := NewRegistry(time.Minute, func(string) {})
	end := func(row store.Session, rec store.Command, _ bool) (store.Session, error) {
		row.State = "completed"
		row.Result, err = json.Marshal(rec.Results)
		return row, err
	}
	d := NewDispatcher(st, u, reg, metrics.New(metrics.Sources{}), func(string, *protocol.ClientMessage, error) {}, end, log,
		protocol.DefaultMaxFrameBytes, time.Minute)
	return d, reg, st
}

// A command can fail (its timeout ends) just as its results are recorded
// by a write that no longer found it waiting: the failure then finds the
// results recorded, and they stand. The session the command alone makes up
// must end with them all the same, in the failure's write.
func TestAFailureThatLosesTheRaceToResultsStillEndsTheCommandsSession(t *testing.T) {
	d, reg, st := newTestDispatcher(t)
	// The device is between links, so that the command waits for it.
	link := &Link{ID: "kiosk-1", Type: protocol.ClientDevice}
	reg.Add(link)
	reg.Remove(link, false)
	ctx := context.Background()
	row := store.Session{ID: "s1", DeviceID: "kiosk-1", RequesterKind: "operator", Kind: "command", State: "running"}
	cmd := d.NewCommand(CommandSpec{DeviceID: "kiosk-1", SessionID: "s1", Actor: "operator", Attempt: 1,
		Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: time.Minute, Session: &row})
	ran := make(chan Result, 1)
	go func() { ran <- d.Run(ctx, cmd) }() // recorded, then waiting unsent for the device
	require.Eventually(t, func() bool { return d.waiting(cmd.rec.ResponseID) != nil }, 10*time.Second, time.Millisecond)

	d.forget(cmd) // as fail does first, before a write that records the results
	results := []protocol.Result{{Status: protocol.ResultSuccess, Result: "done", CallID: cmd.rec.Actions[0].CallID}}
	require.NoError(t, st.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.Commands().RecordResults("kiosk-1", cmd.rec.ResponseID, results)
		return err
	}))
	d.fail(cmd, "device \"kiosk-1\" did not answer within 1m0s")

	r := <-ran
	assert.True(t, r.Recorded)
	assert.Equal(t, results, r.Results, "the results stand")
	ended, err := st.Sessions().Get(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, "completed", ended.State, "the session ended, with the results")
	want, _ := json.Marshal(results)
	assert.JSONEq(t, string(want), string(ended.Result))
}
