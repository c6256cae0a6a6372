package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fleetTool is a testdata fixture as tool name at version, signed with
// the test key: each name and version is a module of its own digest.
func fleetTool(t testing.TB, fixture, name, version string) []byte {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join(testenv.TestdataTools(), fixture+".wasm"))
	require.NoError(t, err)
	m, err := manifest.Parse(must(os.ReadFile(filepath.Join(testenv.TestdataTools(), fixture+".json"))))
	require.NoError(t, err)
	m.Name, m.Version = name, version
	out, err := manifest.Embed(wasm, m)
	require.NoError(t, err)
	priv, err := signature.LoadPrivateKey(filepath.Join(testenv.Root(), "testdata", "keys", "test.key"))
	require.NoError(t, err)
	out, err = signature.Sign(out, priv)
	require.NoError(t, err)
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func digestOf(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return hex.EncodeToString(sum[:])
}

// fleet is devices on one server, each an agent that trusts the test key
// and keeps its own data dir across restarts, and counts what it stages
// and applies.
type fleet struct {
	c      *cluster
	mu     sync.Mutex
	agents map[string]*fleetAgent
}

type fleetAgent struct {
	id, token, data string
	run             *runningAgent
	// applied counts the revisions the device applied (not unchanged),
	// by rollout and revision; staged the modules it kept anew.
	applied map[string]int
	staged  int
}

func newFleet(c *cluster) *fleet { return &fleet{c: c, agents: map[string]*fleetAgent{}} }

// add enrolls id with labels and starts its agent.
func (f *fleet) add(t *testing.T, id string, labels map[string]string) {
	resp, err := f.c.api.Enroll(context.Background(), api.EnrollRequest{ID: id, Labels: labels})
	require.NoError(t, err)
	token := filepath.Join(t.TempDir(), id+".token")
	require.NoError(t, os.WriteFile(token, []byte(resp.Token), 0o600))
	a := &fleetAgent{id: id, token: token, data: t.TempDir(), applied: map[string]int{}}
	f.mu.Lock()
	f.agents[id] = a
	f.mu.Unlock()
	f.start(t, id)
}

// start starts id's agent again, on its data dir, and waits for it to be
// online.
func (f *fleet) start(t *testing.T, id string) {
	a := f.agents[id]
	cfg := agent.Config{
		ID: id, ServerURL: f.c.wsURL(), TokenFile: a.token, DataDir: a.data, CompileCacheDir: sharedCompileCache(t),
		TrustedKeys: []ed25519.PublicKey{testenv.TestKey(t)}, HeartbeatInterval: 100 * time.Millisecond,
		ShutdownGrace: 500 * time.Millisecond, Logger: testLogger().With("device", id),
	}
	onRecord(func(r slog.Record) { f.logged(id, r) })(&cfg)
	a.run = runAgent(t, cfg)
	f.c.waitOnline(id, true)
}

func (f *fleet) logged(id string, r slog.Record) {
	attrs := map[string]any{}
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.Any()
		return true
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.agents[id]
	switch {
	case r.Message == "revision applied" && attrs["unchanged"] == false:
		a.applied[fmt.Sprintf("%v@%v", attrs["rollout"], attrs["revision"])]++
	case r.Message == "module staged" && attrs["already"] == false:
		a.staged++
	}
}

// stop stops id's agent and waits until the server sees it offline.
func (f *fleet) stop(id string) {
	f.agents[id].run.stop()
	f.c.waitOnline(id, false)
}

// appliedOnce checks that each device in ids applied rollout@revision
// exactly once, and that no other device applied it.
func (f *fleet) appliedOnce(t *testing.T, key string, ids []string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for id, a := range f.agents {
		n := a.applied[key]
		if want[id] {
			assert.Equal(t, 1, n, "%s applies %s once", id, key)
		} else {
			assert.Zero(t, n, "%s never applies %s", id, key)
		}
	}
}

// reported is what device id last reported of rollout name.
func (f *fleet) reported(t *testing.T, id, name string) (protocol.RolloutReport, bool) {
	d := f.c.device(id)
	if d.Info == nil {
		return protocol.RolloutReport{}, false
	}
	reports, _ := protocol.RolloutsFromMetadata(d.Info.CustomMetadata)
	r, ok := reports[name]
	return r, ok
}

// apply uploads modules and applies a rollout of them with the rest of
// spec, returning its revision.
func (f *fleet) apply(t *testing.T, spec map[string]any, modules ...[]byte) int {
	t.Helper()
	var tools []string
	for _, m := range modules {
		mod, err := f.c.api.PutModule(context.Background(), m)
		require.NoError(t, err)
		tools = append(tools, mod.SHA256)
	}
	spec["tools"] = tools
	out, err := f.c.api.ApplyRollout(context.Background(), must(json.Marshal(spec)))
	require.NoError(t, err)
	return out.Revision
}

// waitState waits until rollout name is in state, and returns it.
func (f *fleet) waitState(t *testing.T, name, state string) api.Rollout {
	t.Helper()
	var r api.Rollout
	require.Eventually(t, func() bool {
		var err error
		r, err = f.c.api.Rollout(context.Background(), name)
		require.NoError(t, err)
		return r.State == state
	}, testenv.Slowdown*60*time.Second, 50*time.Millisecond, "rollout %s: want %s, is %s (%s): %+v", name, state, r.State, r.Reason, r.Counts)
	return r
}

// waitCount waits until rollout name has n devices in state.
func (f *fleet) waitCount(t *testing.T, name, state string, n int) api.Rollout {
	t.Helper()
	var r api.Rollout
	require.Eventually(t, func() bool {
		var err error
		r, err = f.c.api.Rollout(context.Background(), name)
		require.NoError(t, err)
		return r.Counts[state] == n
	}, testenv.Slowdown*60*time.Second, 50*time.Millisecond, "rollout %s: want %d %s, have %+v", name, n, state, r.Counts)
	return r
}

func devicesIn(r api.Rollout, state string) []string {
	var out []string
	for _, d := range r.Devices {
		if d.State == state {
			out = append(out, d.DeviceID)
		}
	}
	return out
}

// noSweep makes events alone start the rollouts' reconciliations.
func noSweep(c *server.Config) { c.Rollouts.Sweep = time.Hour }

func TestARolloutOfTwoToolsReachesItsLabelGroupInWavesAndARevisionThatFailsItsHealthCheckRollsBack(t *testing.T) {
	c := newCluster(t, noSweep)
	f := newFleet(c)
	const devices = 6
	var lobby []string
	for i := range devices {
		id := fmt.Sprintf("dev-%02d", i)
		site := "depot"
		if i%2 == 0 {
			site = "lobby"
			lobby = append(lobby, id)
		}
		f.add(t, id, map[string]string{"site": site})
	}
	greet1, hello1 := fleetTool(t, "echo", "greet", "1"), fleetTool(t, "echo", "hello", "1")
	spec := map[string]any{"name": "kiosk-tools", "selector": "site=lobby", "waves": []any{1, "10%", "100%"},
		"health": []any{map[string]any{"tool": "greet", "parameters": map[string]any{"name": "probe"}}},
		"max_failures": 0, "on_failure": "rollback", "device_timeout": "1m"}
	require.Equal(t, 1, f.apply(t, spec, greet1, hello1))
	r := f.waitState(t, "kiosk-tools", api.RolloutDone)
	assert.ElementsMatch(t, lobby, devicesIn(r, api.DeviceDone))
	f.appliedOnce(t, "kiosk-tools@1", lobby)
	for _, id := range lobby {
		rep, ok := f.reported(t, id, "kiosk-tools")
		require.True(t, ok, id)
		assert.Equal(t, map[string]string{"greet": digestOf(greet1), "hello": digestOf(hello1)}, rep.Tools, id)
		res := onlyResult(t, c.exec(id, "greet", map[string]any{"hi": id}, 10*time.Second))
		assert.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
	}

	t.Run("a revision whose health check fails on the canary rolls back", func(t *testing.T) {
		greet2 := fleetTool(t, "fail", "greet", "2")
		require.Equal(t, 2, f.apply(t, spec, greet2, hello1))
		r := f.waitState(t, "kiosk-tools", api.RolloutRolledBack)
		assert.Equal(t, 1, r.Revision)
		assert.Contains(t, r.Reason, "1 of 1 devices failed, past max_failures 0")
		f.appliedOnce(t, "kiosk-tools@2", lobby[:1])
		for _, id := range lobby {
			rep, _ := f.reported(t, id, "kiosk-tools")
			assert.Equal(t, digestOf(greet1), rep.Tools["greet"], id)
		}
		hist, err := c.api.RolloutHistory(context.Background(), "kiosk-tools")
		require.NoError(t, err)
		require.Len(t, hist, 2)
		assert.True(t, strings.HasPrefix(hist[0].Outcome, "rolled back: "), hist[0].Outcome)
		assert.Equal(t, "", hist[1].Outcome)
	})
}
