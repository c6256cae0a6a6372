package store

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestARolloutsRevisionsModulesAndDevicesAreKeptAcrossARestart(t *testing.T) {
	s, path := openTest(t)
	ctx := context.Background()
	body := []byte("\x00asm-module")
	write(t, s, func(tx *Tx) error {
		return tx.Rollouts().PutModule(Module{SHA256: "aa", Tool: "greet", Size: int64(len(body)), Body: body})
	})
	write(t, s, func(tx *Tx) error {
		return tx.Rollouts().PutModule(Module{SHA256: "aa", Tool: "other", Body: []byte("x")})
	})
	var rev int
	for want := 1; want <= 2; want++ {
		write(t, s, func(tx *Tx) (err error) {
			rev, err = tx.Rollouts().AddRevision(RolloutRevision{Name: "kiosk", Spec: json.RawMessage(`{"name":"kiosk"}`),
				Tools: map[string]string{"greet": "aa"}, CreatedBy: "alice"}, "rolling")
			return err
		})
		assert.Equal(t, want, rev)
	}
	write(t, s, func(tx *Tx) error {
		return tx.Rollouts().PutDevice(RolloutDevice{Name: "kiosk", DeviceID: "d1", Revision: 2, Applied: 1, Wave: 0, State: "changing", SessionID: "s1"})
	})
	write(t, s, func(tx *Tx) error {
		return tx.Rollouts().PutDevice(RolloutDevice{Name: "kiosk", DeviceID: "d1", Revision: 2, Applied: 2, Wave: 0, State: "done"})
	})

	require.NoError(t, s.Close())
	s, _ = openTestAt(t, path)
	m, err := s.Rollouts().Module(ctx, "aa")
	require.NoError(t, err)
	assert.Equal(t, "greet", m.Tool, "a digest kept once is not overwritten")
	assert.Equal(t, body, m.Body)
	_, err = s.Rollouts().Module(ctx, "bb")
	assert.ErrorIs(t, err, ErrNotFound)

	r, err := s.Rollouts().Get(ctx, "kiosk")
	require.NoError(t, err)
	assert.Equal(t, 2, r.Revision)
	assert.Equal(t, "rolling", r.State)
	history, err := s.Rollouts().Revisions(ctx, "kiosk")
	require.NoError(t, err)
	require.Len(t, history, 2)
	assert.Equal(t, []string{"", "superseded"}, []string{history[0].Outcome, history[1].Outcome})
	assert.Equal(t, map[string]string{"greet": "aa"}, history[0].Tools)
	devs, err := s.Rollouts().Devices(ctx, "kiosk")
	require.NoError(t, err)
	require.Len(t, devs, 1)
	assert.Equal(t, "done", devs[0].State)
	assert.Equal(t, 2, devs[0].Applied)
}

func TestADevicesLabelsChangeWithTheIndexSelectorsRead(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	write(t, s, func(tx *Tx) error { return tx.Devices().Create("d1", "h1", map[string]string{"site": "lobby"}) })
	write(t, s, func(tx *Tx) error {
		return tx.Devices().SetLabels("d1", map[string]string{"site": "hall", "kind": "kiosk"})
	})
	d, err := s.Devices().Get(ctx, "d1")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"site": "hall", "kind": "kiosk"}, d.Labels)
	for sel, want := range map[string][]string{"site=lobby": {}, "site=hall": {"d1"}, "kind=kiosk,site=hall": {"d1"}} {
		parsed, err := access.ParseSelector(sel)
		require.NoError(t, err)
		ids, err := s.Devices().Matching(ctx, parsed, 0)
		require.NoError(t, err)
		assert.Equal(t, want, ids, sel)
	}
	err = s.Write(ctx, func(tx *Tx) error { return tx.Devices().SetLabels("nobody", nil) })
	assert.ErrorIs(t, err, ErrNotFound)
}
