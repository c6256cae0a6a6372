package tasks

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clusterDoor is a front door of a node of a cluster, which runs no task
// itself, with a task in the store in state; published counts the
// cancels it asks the other nodes for.
func clusterDoor(t *testing.T, state api.TaskState) (d *FrontDoor, published *int) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "edgeaip.db"), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	m := NewSessionManager(SessionConfig{}, func() store.Owner { return store.Owner{} }, st, nil, nil, nil, slog.New(slog.DiscardHandler))
	require.NoError(t, st.Write(t.Context(), func(tx *store.Tx) error {
		return tx.Sessions().Insert(store.Session{ID: "s1", DeviceID: "kiosk-1", RequesterKind: api.RequesterMCP, Kind: api.KindCommand,
			State: string(state), CreatedAt: time.Now()})
	}))
	published = new(int)
	return &FrontDoor{sessions: m, CancelElsewhere: func(string, string) error { *published++; return nil }}, published
}

// A task that ended, or none at all, is not cancelled anywhere: the
// caller hears so, as on a single node, and no node is asked.
func TestCancellingATaskThatEndedOrIsNoneAsksNoOtherNode(t *testing.T) {
	d, published := clusterDoor(t, api.StateCompleted)
	assert.ErrorIs(t, d.CancelAnywhere(t.Context(), "s1", "x"), ErrNotRunning)
	assert.ErrorIs(t, d.CancelAnywhere(t.Context(), "nope", "x"), store.ErrNotFound)
	assert.Zero(t, *published)
}

// A cancel that no node acts on (the task between nodes, the message
// lost) is answered within a bound, saying so, not waited on for as long
// as the task may run.
func TestACancelNoNodeActsOnIsAnsweredWithinItsBound(t *testing.T) {
	d, published := clusterDoor(t, api.StateRunning)
	d.cancelWait = 50 * time.Millisecond
	err := d.CancelAnywhere(context.Background(), "s1", "tasks/cancel by ann")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `task "s1" was to be cancelled on the node that runs it, and has not ended within 50ms`)
	assert.Equal(t, 1, *published)
}
