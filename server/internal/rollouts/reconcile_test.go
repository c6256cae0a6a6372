package rollouts

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/rollout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testEngine is an engine on a fresh store, whose devices are online as
// online says, and report nothing but report's.
func testEngine(t *testing.T, online bool, report map[string]protocol.RolloutReport) (*Engine, *store.Store) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "test.db"), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e := New(Config{Store: st, Logger: slog.New(slog.DiscardHandler),
		Matching: func(ctx context.Context, sel access.Selector) ([]string, error) {
			return st.Devices().Matching(ctx, sel, 0)
		},
		Online: func(string) bool { return online },
		Inventory: func(context.Context, string) *protocol.SystemInfo {
			custom := map[string]any{}
			protocol.AddRolloutMetadata(custom, report, nil)
			return &protocol.SystemInfo{CustomMetadata: custom}
		}})
	t.Cleanup(func() { e.Stop(); e.Wait() })
	return e, st
}

func testSpec(t *testing.T, name string, tools ...string) *rollout.Spec {
	s := &rollout.Spec{Name: name, Selector: "site=lobby", Tools: tools}
	require.NoError(t, s.Check(true))
	return s
}

var shaX, shaY = strings.Repeat("a", 64), strings.Repeat("b", 64)

// A rollback that would bring a tool back to devices another rollout
// has since been let put a tool of that name on is refused, naming it.
func TestARollbackThatWouldBringBackAnotherRolloutsToolIsRefused(t *testing.T) {
	e, st := testEngine(t, false, nil)
	ctx := context.Background()
	require.NoError(t, st.Write(ctx, func(tx *store.Tx) error {
		for sha, tool := range map[string]string{shaX: "x", shaY: "y"} {
			if err := tx.Rollouts().PutModule(store.Module{SHA256: sha, Tool: tool, Body: []byte{0}}); err != nil {
				return err
			}
		}
		return tx.Devices().Create("dev1", "h", map[string]string{"site": "lobby"})
	}))
	admin := &identity.Caller{Name: "admin"}
	for _, s := range []*rollout.Spec{testSpec(t, "A", shaX), testSpec(t, "A", shaY), testSpec(t, "B", shaX)} {
		_, err := e.Apply(ctx, admin, s)
		require.NoError(t, err)
	}
	_, err := e.Rollback(ctx, admin, "A")
	require.ErrorContains(t, err, `rollouts "A" and "B" would both set tool x on device dev1`)
}

// A device no longer selected is none of the rollout's failures, and one
// selected again while its tools were being removed changes again.
func TestADeviceThatLeftCountsForNothingAndComesBackAsNew(t *testing.T) {
	e, st := testEngine(t, true, nil)
	s := testSpec(t, "A", shaX)
	require.NoError(t, st.Write(context.Background(), func(tx *store.Tx) error {
		_, err := tx.Rollouts().AddRevision(store.RolloutRevision{Name: "A", Spec: specJSON(s), Tools: map[string]string{"x": shaX}}, api.RolloutRolling)
		return err
	}))
	v := &view{r: store.Rollout{Name: "A", Revision: 2, Latest: 2, State: api.RolloutRolling}, spec: s, tools: map[string]string{"x": shaX},
		selected: []string{"kept"},
		rows: map[string]store.RolloutDevice{
			"kept": {Name: "A", DeviceID: "kept", Revision: 2, Applied: 2, State: api.DeviceDone},
			"left": {Name: "A", DeviceID: "left", Revision: 2, Applied: 2, State: api.DeviceFailed, Error: "device_timeout 5m0s passed"},
		}}
	assert.Empty(t, v.overBudget())

	v.selected = []string{"kept", "back"}
	v.rows["back"] = store.RolloutDevice{Name: "A", DeviceID: "back", Revision: 2, Applied: 0, State: api.DeviceRemoving}
	require.NoError(t, e.assign(context.Background(), v))
	assert.Equal(t, api.DevicePending, v.rows["back"].State)
}

// A device that left the selector while offline, whose change may have
// landed unheard, is kept until it links and says; one that never
// started is forgotten.
func TestADeviceThatLeftWhileOfflineIsKeptUntilItSays(t *testing.T) {
	e, _ := testEngine(t, false, nil)
	ctx := context.Background()
	assert.False(t, e.hasNothing(ctx, store.RolloutDevice{Name: "A", DeviceID: "d", State: api.DeviceWaiting}, false))
	assert.False(t, e.hasNothing(ctx, store.RolloutDevice{Name: "A", DeviceID: "d", State: api.DeviceChanging}, false))
	assert.True(t, e.hasNothing(ctx, store.RolloutDevice{Name: "A", DeviceID: "d", State: api.DevicePending}, false))

	linked, _ := testEngine(t, true, map[string]protocol.RolloutReport{"A": {Revision: 1}})
	assert.False(t, linked.hasNothing(ctx, store.RolloutDevice{Name: "A", DeviceID: "d", State: api.DeviceWaiting}, true), "it reports revision 1")
	assert.True(t, linked.hasNothing(ctx, store.RolloutDevice{Name: "B", DeviceID: "d", State: api.DeviceWaiting}, true), "it reports nothing of B")
}

// Two rollouts that both name the agent's version and pick a device in
// common are refused, at apply and at a relabel: they would take turns
// at the device's agent.
func TestTwoRolloutsOfTheAgentOnOneDeviceAreRefused(t *testing.T) {
	e, st := testEngine(t, false, nil)
	ctx := context.Background()
	require.NoError(t, st.Write(ctx, func(tx *store.Tx) error {
		if err := tx.Devices().Create("dev1", "h1", map[string]string{"site": "lobby"}); err != nil {
			return err
		}
		return tx.Devices().Create("dev2", "h2", map[string]string{"site": "depot"})
	}))
	admin := &identity.Caller{Name: "admin"}
	agent := func(name, selector, version string) *rollout.Spec {
		s := &rollout.Spec{Name: name, Selector: rollout.Selector(selector), Agent: version}
		require.NoError(t, s.Check(true))
		return s
	}
	_, err := e.Apply(ctx, admin, agent("a", "site=lobby", "2.0.0"))
	require.NoError(t, err)
	_, err = e.Apply(ctx, admin, agent("b", "zone=a", "3.0.0"))
	require.NoError(t, err, "no device in common")
	_, err = e.Apply(ctx, admin, agent("c", "site!=depot", "3.0.0"))
	require.ErrorContains(t, err, `rollouts "c" and "a" would both set the agent's version on device dev1`)
	err = e.CheckLabels(ctx, "dev1", map[string]string{"site": "lobby", "zone": "a"})
	require.ErrorContains(t, err, `rollouts "a" and "b" would both set the agent's version on device dev1`)
	require.NoError(t, e.CheckLabels(ctx, "dev2", map[string]string{"site": "depot", "zone": "a"}), "one rollout of the agent picks it")
}
