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
	return testenv.Packed(t, wasm, m)
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
	api *api.Client
	// ws is the server's WebSocket URL; it stays the same across a
	// restart of the server.
	ws     string
	mu     sync.Mutex
	agents map[string]*fleetAgent
}

type fleetAgent struct {
	id, token, data string
	run             *runningAgent
	// applied counts the revisions the device applied (not unchanged),
	// by rollout and revision; staged the modules it kept anew.
	applied   map[string]int
	appliedAt map[string]time.Time
	staged    int
}

func newFleet(c *api.Client, wsURL string) *fleet {
	return &fleet{api: c, ws: wsURL, agents: map[string]*fleetAgent{}}
}

// add enrolls id with labels and starts its agent.
func (f *fleet) add(t *testing.T, id string, labels map[string]string) {
	resp, err := f.api.Enroll(context.Background(), api.EnrollRequest{ID: id, Labels: labels})
	require.NoError(t, err)
	token := filepath.Join(t.TempDir(), id+".token")
	require.NoError(t, os.WriteFile(token, []byte(resp.Token), 0o600))
	a := &fleetAgent{id: id, token: token, data: t.TempDir(), applied: map[string]int{}, appliedAt: map[string]time.Time{}}
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
		ID: id, ServerURL: f.ws, TokenFile: a.token, DataDir: a.data, CompileCacheDir: sharedCompileCache(t),
		TrustedKeys: []ed25519.PublicKey{testenv.TestKey(t)}, HeartbeatInterval: 100 * time.Millisecond,
		ShutdownGrace: 500 * time.Millisecond, Logger: testLogger().With("device", id),
	}
	onRecord(func(r slog.Record) { f.logged(id, r) })(&cfg)
	a.run = runAgent(t, cfg)
	f.waitOnline(t, id, true)
}

func (f *fleet) waitOnline(t *testing.T, id string, online bool) {
	t.Helper()
	require.Eventually(t, func() bool { return f.device(t, id).Online == online },
		testenv.Slowdown*20*time.Second, 20*time.Millisecond, "device %s online=%v", id, online)
}

func (f *fleet) device(t *testing.T, id string) api.Device {
	t.Helper()
	var d api.Device
	require.NoError(t, f.api.Do(context.Background(), "GET", "/api/devices/"+id, nil, &d))
	return d
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
		key := fmt.Sprintf("%v@%v", attrs["rollout"], attrs["revision"])
		if attrs["tools"] == int64(0) {
			key = fmt.Sprintf("%v@removed", attrs["rollout"])
		}
		a.applied[key]++
		a.appliedAt[key] = r.Time
	case r.Message == "module staged" && attrs["already"] == false:
		a.staged++
	}
}

// stop stops id's agent and waits until the server sees it offline.
func (f *fleet) stop(t *testing.T, id string) {
	f.agents[id].run.stop()
	f.waitOnline(t, id, false)
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
	d := f.device(t, id)
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
		mod, err := f.api.PutModule(context.Background(), m)
		require.NoError(t, err)
		tools = append(tools, mod.SHA256)
	}
	spec["tools"] = tools
	out, err := f.api.ApplyRollout(context.Background(), must(json.Marshal(spec)))
	require.NoError(t, err)
	return out.Revision
}

// waitState waits until rollout name is in state, and returns it.
func (f *fleet) waitState(t *testing.T, name, state string) api.Rollout {
	t.Helper()
	return f.waitFor(t, name, "state "+state, func(r api.Rollout) bool { return r.State == state })
}

// waitCount waits until rollout name has n devices in state.
func (f *fleet) waitCount(t *testing.T, name, state string, n int) api.Rollout {
	t.Helper()
	return f.waitFor(t, name, fmt.Sprintf("%d devices %s", n, state), func(r api.Rollout) bool { return r.Counts[state] == n })
}

// waitFor waits until rollout name is as ok wants, and returns it.
func (f *fleet) waitFor(t *testing.T, name, want string, ok func(api.Rollout) bool) api.Rollout {
	t.Helper()
	deadline := time.Now().Add(testenv.Slowdown * 60 * time.Second)
	for {
		r, err := f.api.Rollout(context.Background(), name)
		require.NoError(t, err)
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("rollout %s: want %s, is %s (%s), devices %+v", name, want, r.State, r.Reason, r.Counts)
		}
		time.Sleep(50 * time.Millisecond)
	}
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

// TestAFleetIsKeptInItsRolloutsDesiredState runs 30 agents over two
// labels, and a rollout of two tools to one of them through the cases of
// issue 39: waves with a health check, a revision that fails it on the
// canary, devices offline during a rollout, relabels in and out, a
// conflicting rollout and a hand deploy over a rollout's tool. Events
// alone start each reconciliation: the sweep is an hour.
func TestAFleetIsKeptInItsRolloutsDesiredState(t *testing.T) {
	c := newCluster(t, noSweep)
	f := newFleet(c.api, c.wsURL())
	var lobby, depot []string
	for i := range 30 {
		id := fmt.Sprintf("dev-%02d", i)
		site := "depot"
		if i%2 == 0 {
			site = "lobby"
			lobby = append(lobby, id)
		} else {
			depot = append(depot, id)
		}
		f.add(t, id, map[string]string{"site": site})
	}
	ctx := context.Background()
	greet1, hello1 := fleetTool(t, "echo", "greet", "1"), fleetTool(t, "echo", "hello", "1")
	spec := map[string]any{"name": "kiosk-tools", "selector": "site=lobby", "waves": []any{1, "10%", "100%"},
		"health":       []any{map[string]any{"tool": "greet", "parameters": map[string]any{"name": "probe"}}},
		"max_failures": 0, "on_failure": "rollback", "device_timeout": "1m"}
	require.Equal(t, 1, f.apply(t, spec, greet1, hello1))
	r := f.waitState(t, "kiosk-tools", api.RolloutDone)

	t.Run("it reaches exactly the 15 selected devices, in three waves", func(t *testing.T) {
		assert.ElementsMatch(t, lobby, devicesIn(r, api.DeviceDone))
		assert.Equal(t, []int{1, 1, 13}, []int{r.Waves[0].Devices, r.Waves[1].Devices, r.Waves[2].Devices})
		f.appliedOnce(t, "kiosk-tools@1", lobby)
		f.inWaveOrder(t, "kiosk-tools@1", r)
		for _, id := range lobby {
			rep, ok := f.reported(t, id, "kiosk-tools")
			require.True(t, ok, id)
			assert.Equal(t, map[string]string{"greet": digestOf(greet1), "hello": digestOf(hello1)}, rep.Tools, id)
		}
		res := onlyResult(t, c.exec(lobby[3], "greet", map[string]any{"hi": "there"}, 10*time.Second))
		assert.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
		_, ok := f.reported(t, depot[0], "kiosk-tools")
		assert.False(t, ok, "a device the selector does not pick has nothing of the rollout")
	})

	t.Run("a revision whose health check fails on the canary rolls back before the later waves change", func(t *testing.T) {
		greet2 := fleetTool(t, "fail", "greet", "2")
		require.Equal(t, 2, f.apply(t, spec, greet2, hello1))
		r := f.waitState(t, "kiosk-tools", api.RolloutRolledBack)
		assert.Equal(t, 1, r.Revision)
		assert.Contains(t, r.Reason, "1 of 1 devices failed, past max_failures 0")
		canary := r.Devices[0].DeviceID
		f.appliedOnce(t, "kiosk-tools@2", []string{canary})
		for _, id := range lobby {
			rep, _ := f.reported(t, id, "kiosk-tools")
			assert.Equal(t, 1, rep.Revision, id)
			assert.Equal(t, digestOf(greet1), rep.Tools["greet"], id)
		}
		hist, err := c.api.RolloutHistory(ctx, "kiosk-tools")
		require.NoError(t, err)
		require.Len(t, hist, 2)
		assert.True(t, strings.HasPrefix(hist[0].Outcome, "rolled back: "), hist[0].Outcome)
		assert.Equal(t, "", hist[1].Outcome, "revision 1 is desired again")
	})

	greet3 := fleetTool(t, "echo", "greet", "3")
	t.Run("devices stopped during a rollout get it when they start again", func(t *testing.T) {
		stopped := lobby[7:]
		for _, id := range stopped {
			f.stop(t, id)
		}
		require.Equal(t, 3, f.apply(t, spec, greet3, hello1))
		r := f.waitCount(t, "kiosk-tools", api.DeviceWaiting, len(stopped))
		assert.ElementsMatch(t, stopped, devicesIn(r, api.DeviceWaiting))
		for _, id := range stopped {
			f.start(t, id)
		}
		f.waitState(t, "kiosk-tools", api.RolloutDone)
		f.waitCount(t, "kiosk-tools", api.DeviceDone, 15)
		f.appliedOnce(t, "kiosk-tools@3", lobby)
	})

	t.Run("a device relabelled into the selector gets it, and one relabelled out loses it", func(t *testing.T) {
		in, out := depot[0], lobby[1]
		_, err := c.api.Label(ctx, in, api.LabelRequest{Set: map[string]string{"site": "lobby"}})
		require.NoError(t, err)
		_, err = c.api.Label(ctx, out, api.LabelRequest{Set: map[string]string{"site": "depot"}})
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			rep, got := f.reported(t, in, "kiosk-tools")
			_, kept := f.reported(t, out, "kiosk-tools")
			return got && rep.Revision == 3 && !kept
		}, testenv.Slowdown*30*time.Second, 50*time.Millisecond)
		r := f.waitCount(t, "kiosk-tools", api.DeviceDone, 15)
		assert.Contains(t, devicesIn(r, api.DeviceDone), in)
		assert.NotContains(t, devicesIn(r, api.DeviceDone), out)
		f.appliedOnce(t, "kiosk-tools@3", append(lobby, in))
		f.appliedOnce(t, "kiosk-tools@removed", []string{out})
	})

	t.Run("two rollouts that would put one tool on a device are refused, naming both", func(t *testing.T) {
		other := map[string]any{"name": "other", "selector": "site=lobby"}
		_, err := c.api.PutModule(ctx, greet3)
		require.NoError(t, err)
		other["tools"] = []string{digestOf(greet3)}
		_, err = c.api.ApplyRollout(ctx, must(json.Marshal(other)))
		require.ErrorContains(t, err, `rollouts "other" and "kiosk-tools" would both set tool greet on devices`)

		other["selector"] = "kind=kiosk"
		out, err := c.api.ApplyRollout(ctx, must(json.Marshal(other)))
		require.NoError(t, err)
		assert.Equal(t, 0, out.Selected)
		assert.Contains(t, out.Note, "picks no device now")
		_, err = c.api.Label(ctx, lobby[2], api.LabelRequest{Set: map[string]string{"kind": "kiosk"}})
		require.ErrorContains(t, err, `rollouts "kiosk-tools" and "other" would both set tool greet on device `+lobby[2])
		_, err = c.api.Enroll(ctx, api.EnrollRequest{ID: "dev-new", Labels: map[string]string{"site": "lobby", "kind": "kiosk"}})
		require.ErrorContains(t, err, `rollouts "kiosk-tools" and "other" would both set tool greet on device dev-new`, "enrolled so, too")
	})

	t.Run("an unsigned module fails the canary with the device's own reason, and rolls back", func(t *testing.T) {
		wasm, err := os.ReadFile(filepath.Join(testenv.SignedTools(), "unsigned_echo.wasm"))
		require.NoError(t, err)
		require.Equal(t, 4, f.apply(t, spec, greet3, wasm))
		r := f.waitState(t, "kiosk-tools", api.RolloutRolledBack)
		assert.Equal(t, 3, r.Revision)
		assert.Contains(t, r.Reason, "refused: module is not signed")
		assert.Equal(t, map[string]int{api.DeviceDone: 15}, r.Counts, "the canary changed nothing; all run revision 3")
		hist, err := c.api.RolloutHistory(ctx, "kiosk-tools")
		require.NoError(t, err)
		assert.Contains(t, hist[0].Outcome, "1 of 1 devices failed")

		for _, action := range []string{"pause", "resume"} {
			_, err := c.api.ControlRollout(ctx, "kiosk-tools", action)
			require.NoError(t, err, action)
		}
		r = f.waitState(t, "kiosk-tools", api.RolloutRolledBack)
		assert.Equal(t, 3, r.Revision, "a rollout rolled back, paused and resumed stays back")
	})

	t.Run("a hand deploy of a rollout's tool is refused unless forced, and forced it shows as drift", func(t *testing.T) {
		id := lobby[4]
		_, err := c.api.DeployTool(ctx, id, greet1, "", 30*time.Second)
		require.ErrorContains(t, err, `tool "greet" on device `+id+` belongs to rollout "kiosk-tools" (revision 3)`)
		resp, err := c.api.DeployToolOver(ctx, id, greet1, "", 30*time.Second)
		require.NoError(t, err)
		require.True(t, resp.Succeeded(), "%+v", resp.Results)
		require.Eventually(t, func() bool {
			r, err := c.api.Rollout(ctx, "kiosk-tools")
			require.NoError(t, err)
			for _, d := range r.Devices {
				if d.DeviceID == id {
					return d.State == api.DeviceDrift && d.Drift["greet"] == digestOf(greet1)
				}
			}
			return false
		}, testenv.Slowdown*30*time.Second, 50*time.Millisecond)
	})
}

// inWaveOrder checks that each device of a wave applied key after every
// device of the waves before it had.
func (f *fleet) inWaveOrder(t *testing.T, key string, r api.Rollout) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var lastOfWave []time.Time
	for _, d := range r.Devices {
		at := f.agents[d.DeviceID].appliedAt[key]
		for len(lastOfWave) <= d.Wave {
			lastOfWave = append(lastOfWave, time.Time{})
		}
		if at.After(lastOfWave[d.Wave]) {
			lastOfWave[d.Wave] = at
		}
	}
	for _, d := range r.Devices {
		at := f.agents[d.DeviceID].appliedAt[key]
		for w := range d.Wave {
			assert.True(t, at.After(lastOfWave[w]), "%s of wave %d applied %s after the last of wave %d", d.DeviceID, d.Wave+1, key, w+1)
		}
	}
}

// TestAKilledServerResumesARolloutAndInstallsNothingTwice kills aip-server
// with SIGKILL while devices are changing, in the second wave of a
// rollout whose health check takes a second, and starts it again on the
// same data dir: the rollout goes on where it was, and no device applies
// the revision twice (a change started again finds it applied).
func TestAKilledServerResumesARolloutAndInstallsNothingTwice(t *testing.T) {
	bin := testenv.Command(t, "aip-server")
	data := t.TempDir()
	srv := startServerProcess(t, bin, "127.0.0.1:0", data)
	f := newFleet(srv.api, srv.wsURL())
	var ids []string
	for i := range 6 {
		id := fmt.Sprintf("kiosk-%d", i)
		ids = append(ids, id)
		f.add(t, id, map[string]string{"site": "lobby"})
	}
	spec := map[string]any{"name": "kiosk-tools", "selector": "site=lobby", "waves": []any{1, "100%"}, "between_waves": "approve",
		"health": []any{map[string]any{"tool": "slowcheck", "parameters": map[string]any{"ms": 1000}}}, "device_timeout": "1m"}
	require.Equal(t, 1, f.apply(t, spec, fleetTool(t, "echo", "greet", "1"), fleetTool(t, "pause", "slowcheck", "1")))
	f.waitState(t, "kiosk-tools", api.RolloutApproval)
	_, err := srv.api.ControlRollout(context.Background(), "kiosk-tools", "resume")
	require.NoError(t, err)
	f.waitCount(t, "kiosk-tools", api.DeviceChanging, 5)

	srv.kill(t)
	srv = startServerProcess(t, bin, srv.addr, data)
	f.api = srv.api

	r := f.waitState(t, "kiosk-tools", api.RolloutDone)
	assert.ElementsMatch(t, ids, devicesIn(r, api.DeviceDone))
	assert.Equal(t, 1, r.Latest)
	f.appliedOnce(t, "kiosk-tools@1", ids)
}
