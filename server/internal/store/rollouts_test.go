package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/pgtest"
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

// In a cluster a node takes the lead of a rollout no live node leads,
// in one fenced write; a leader whose lease is gone loses it, and once
// another node has taken it the old leader's writes of the rollout move
// nothing.
func TestARolloutsLeadGoesToOneLiveNodeAndAStaleLeaderMovesNothing(t *testing.T) {
	s, _ := openTestAt(t, pgtest.Shared(t).NewDatabase(t))
	ctx := context.Background()
	join := func(id string) int64 {
		var epoch int64
		write(t, s, func(tx *Tx) (err error) { epoch, _, err = tx.Cluster().JoinNode(id, 1, "", time.Minute); return err })
		return epoch
	}
	take := func(node string, epoch int64) bool {
		var took bool
		write(t, s, func(tx *Tx) (err error) { took, err = tx.Rollouts().TakeLead("kiosk", node, epoch); return err })
		return took
	}
	a, b := join("a"), join("b")
	write(t, s, func(tx *Tx) error {
		_, err := tx.Rollouts().AddRevision(RolloutRevision{Name: "kiosk", Spec: json.RawMessage(`{}`), Tools: map[string]string{}}, "rolling")
		return err
	})

	require.True(t, take("a", a), "no node leads it: a takes it")
	require.True(t, take("a", a), "a leads it already")
	assert.False(t, take("b", b), "a holds its lease: b does not take it")
	assert.False(t, take("c", 1), "a node that holds no lease takes nothing")
	seenByA, err := s.Rollouts().Get(ctx, "kiosk")
	require.NoError(t, err)
	assert.Equal(t, "a", seenByA.LeaderNode)

	write(t, s, func(tx *Tx) error { return tx.Cluster().LeaveNode("a", a) }) // taken as dead
	l, err := s.Rollouts().Leader(ctx, "kiosk")
	require.NoError(t, err)
	assert.Equal(t, RolloutLeader{Node: "a", Epoch: a, Held: false}, l)
	require.True(t, take("b", b), "a's lease is gone: b takes it")

	next := seenByA
	next.Wave++
	err = s.Write(ctx, func(tx *Tx) error { return tx.Rollouts().SetRollout(next, seenByA) })
	require.ErrorIs(t, err, ErrRolloutMoved, "a, paused while b took the lead, moves nothing")
	seenByB, err := s.Rollouts().Get(ctx, "kiosk")
	require.NoError(t, err)
	next = seenByB
	next.Wave++
	write(t, s, func(tx *Tx) error { return tx.Rollouts().SetRollout(next, seenByB) })

	write(t, s, func(tx *Tx) error { return tx.Rollouts().ReleaseLead("kiosk", "a", a) })
	l, err = s.Rollouts().Leader(ctx, "kiosk")
	require.NoError(t, err)
	assert.Equal(t, RolloutLeader{Node: "b", Epoch: b, Held: true}, l, "a gives up nothing it does not lead")
	write(t, s, func(tx *Tx) error { return tx.Rollouts().ReleaseLead("kiosk", "b", b) })
	a2 := join("a")
	assert.True(t, take("a", a2), "b gave it up: a, back at a new epoch, takes it")
}
