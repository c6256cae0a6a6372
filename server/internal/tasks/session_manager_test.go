package tasks

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/plan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestASessionEndingInAnUnknownStateFails(t *testing.T) {
	m := NewSessionManager(SessionConfig{}, func() store.Owner { return store.Owner{} }, nil, nil, nil, nil, slog.New(slog.DiscardHandler))
	s := m.newSession(SessionSpec{ID: "s1", Plan: &plan.Plan{}})
	out := settle(s, outcome[string]{state: "paused", Result: "r"})
	assert.Equal(t, outcome[string]{state: api.StateFailed, Result: "r", err: "session ended in unknown state"}, out)
	out = settle(s, outcome[string]{state: api.StateCompleted})
	assert.Equal(t, api.StateCompleted, out.state)
}

// getOrCreateSession gives the session its requester already runs,
// rather than a second one under the same id.
func TestGetOrCreateReturnsTheRunningSession(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "edgeaip.db"), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	m := NewSessionManager(SessionConfig{}, func() store.Owner { return store.Owner{} }, st, nil, nil, nil, slog.New(slog.DiscardHandler))
	spec := SessionSpec{ID: "s1", DeviceID: "kiosk-1", Requester: api.Requester{Kind: api.RequesterOperator}, Plan: &plan.Plan{}}
	s, created, err := m.getOrCreateSession(t.Context(), spec)
	require.NoError(t, err)
	require.True(t, created)
	defer m.release(s)
	again, created, err := m.getOrCreateSession(t.Context(), spec)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Same(t, s, again, "get_or_create returns the running session")
}
