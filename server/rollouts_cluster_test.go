package server

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// applyRollout applies, through ts, rollout name of the echo fixture as
// tool name, to devices labelled kind=kiosk (none here).
func applyRollout(t *testing.T, ts *testServer, name string) {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join(testenv.TestdataTools(), "echo.wasm"))
	require.NoError(t, err)
	m, err := manifest.Parse(must(os.ReadFile(filepath.Join(testenv.TestdataTools(), "echo.json"))))
	require.NoError(t, err)
	m.Name = name
	wasm, err = manifest.Embed(wasm, m)
	require.NoError(t, err)
	mod, err := ts.api.PutModule(context.Background(), wasm)
	require.NoError(t, err)
	spec := map[string]any{"name": name, "selector": "kind=kiosk", "tools": []string{mod.SHA256}}
	_, err = ts.api.ApplyRollout(context.Background(), must(json.Marshal(spec)))
	require.NoError(t, err)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// leaderOf is the node that rollout name's row names as its leader.
func leaderOf(t *testing.T, ts *testServer, name string) string {
	t.Helper()
	r, err := ts.srv.store.Rollouts().Get(context.Background(), name)
	require.NoError(t, err)
	return r.LeaderNode
}

// One node leads each rollout. A node not sure that it holds its lease
// leads none: it gives up those it led, and takes none, though a
// rollout is applied through it; another node leads them. Once it is
// sure again, it does not take them back from a leader that holds its
// lease.
func TestANodeNotSureOfItsLeaseLeadsNoRollout(t *testing.T) {
	tc := newTestCluster(t)
	a := tc.node("a")
	applyRollout(t, a, "first")
	require.Eventually(t, func() bool { return leaderOf(t, a, "first") == "a" }, 10*time.Second, 10*time.Millisecond,
		"the only node leads it")
	b := tc.node("b")

	// The store refuses a's heartbeats (and b's sweep of a's row): as in
	// a pause, a cannot know whether it still holds its lease.
	exec := tc.sql(t)
	exec(`CREATE FUNCTION refuse_a() RETURNS trigger AS $$ BEGIN
		IF NEW.node_id = 'a' THEN RAISE EXCEPTION 'the test refuses node a'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`)
	exec(`CREATE TRIGGER refuse_a BEFORE UPDATE ON cluster_nodes FOR EACH ROW EXECUTE FUNCTION refuse_a()`)
	require.Eventually(t, func() bool { return a.srv.cluster.LeaseDoubt() != "" }, 10*time.Second, 10*time.Millisecond)
	applyRollout(t, a, "second")
	for _, name := range []string{"first", "second"} {
		require.Eventually(t, func() bool { return leaderOf(t, a, name) == "b" }, 10*time.Second, 10*time.Millisecond,
			"rollout %s is led by b", name)
	}
	assert.NotContains(t, a.logs.String(), `msg="took the lead of the rollout" rollout=second`)

	exec(`DROP TRIGGER refuse_a ON cluster_nodes`)
	require.Eventually(t, func() bool { return a.srv.cluster.LeaseDoubt() == "" }, 10*time.Second, 10*time.Millisecond)
	a.srv.rollouts.KickAll()
	applyRollout(t, a, "third")
	require.Eventually(t, func() bool { return leaderOf(t, b, "third") != "" }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, "b", leaderOf(t, a, "first"))
	assert.Equal(t, "b", leaderOf(t, a, "second"))
}
