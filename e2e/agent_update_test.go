package e2e

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// updates is a fleet of agent processes that update themselves, and the
// server they link to (addr, its API api): each starts as the flashed
// build, under its supervisor, and trusts the test's release key.
type updates struct {
	*cluster // the API's device helpers: only t and api are set
	t        *testing.T
	addr     string
	key      ed25519.PrivateKey
	keyFile  string // the public key, as the agents' config names it
	flashed  string // the flashed binary
	agents   map[string]*agentProcess
	data     map[string]string
}

// newUpdates serves the fleet from one server in process.
func newUpdates(t *testing.T, flashed string) *updates {
	c := newCluster(t, noSweep)
	return newUpdatesOn(t, flashed, c.api, c.hostPort())
}

// newUpdatesOn serves the fleet from the server at addr.
func newUpdatesOn(t *testing.T, flashed string, c *api.Client, addr string) *updates {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	pem, err := signature.EncodePublicKey(pub)
	require.NoError(t, err)
	keyFile := filepath.Join(t.TempDir(), "release.pub")
	require.NoError(t, os.WriteFile(keyFile, pem, 0o600))
	return &updates{cluster: &cluster{t: t, api: c}, t: t, addr: addr, key: priv, keyFile: keyFile, flashed: flashed,
		agents: map[string]*agentProcess{}, data: map[string]string{}}
}

// add enrolls id with labels and starts its agent at url (the server's
// by default).
func (u *updates) add(id string, labels map[string]string, url string) *agentProcess {
	u.t.Helper()
	resp, err := u.api.Enroll(context.Background(), api.EnrollRequest{ID: id, Labels: labels})
	require.NoError(u.t, err)
	token := filepath.Join(u.t.TempDir(), id+".token")
	require.NoError(u.t, os.WriteFile(token, []byte(resp.Token), 0o600))
	u.data[id] = u.t.TempDir()
	yaml := agentYAML(u.t, id, cmpOr(url, "ws://"+u.addr+"/ws"), token, u.data[id], u.t.TempDir()) +
		fmt.Sprintf("updates: {release_keys: [%q]}\n", u.keyFile)
	p := newAgentProcess(u.t, yaml)
	p.argv[0] = u.flashed
	p.start()
	u.agents[id] = p
	return p
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// publish signs body as release version for this machine's platform and
// publishes it.
func (u *updates) publish(version string, body []byte) agentrelease.Release {
	return u.publishSigned(version, body, u.key)
}

// publishSigned is publish with key.
func (u *updates) publishSigned(version string, body []byte, key ed25519.PrivateKey) agentrelease.Release {
	u.t.Helper()
	sum := sha256.Sum256(body)
	r := agentrelease.Sign(agentrelease.Release{Version: version, OS: runtime.GOOS, Arch: runtime.GOARCH,
		SHA256: hex.EncodeToString(sum[:]), Size: int64(len(body))}, key)
	_, err := u.api.PublishRelease(context.Background(), r, bytes.NewReader(body))
	require.NoError(u.t, err)
	return r
}

// rollout applies spec and returns its revision.
func (u *updates) rollout(spec map[string]any) int {
	u.t.Helper()
	out, err := u.api.ApplyRollout(context.Background(), must(json.Marshal(spec)))
	require.NoError(u.t, err)
	return out.Revision
}

// waitFor waits until rollout name is as ok wants, and returns it.
func (u *updates) waitFor(name, want string, ok func(api.Rollout) bool) api.Rollout {
	u.t.Helper()
	return (&fleet{api: u.api}).waitFor(u.t, name, want, ok)
}

// report is what device id last reported of its agent and its updates.
func (u *updates) report(id string) (string, protocol.AgentUpdateReport) {
	d := u.device(id)
	if d.Info == nil {
		return "", protocol.AgentUpdateReport{}
	}
	r, _ := protocol.AgentUpdateFromMetadata(d.Info.CustomMetadata)
	return d.Info.AgentVersion, r
}

// runs waits until device id runs version, committed.
func (u *updates) runs(id, version string) {
	u.t.Helper()
	require.Eventually(u.t, func() bool {
		v, r := u.report(id)
		return v == version && !r.Trial && u.device(id).Online
	}, testenv.Slowdown*60*time.Second, 50*time.Millisecond, "%s never ran %s, committed", id, version)
}

func script(body string) []byte { return []byte("#!/bin/sh\n" + body + "\n") }

// health is the rollouts' health check: a fixture tool on the device.
var health = []any{map[string]any{"tool": "echo", "parameters": map[string]any{}}}

// TestAFleetUpdatesItsAgentInWavesAndEveryBadReleaseIsRolledBack runs ten
// agent processes, flashed with a build stamped 1.0.0, and rolls out a
// build stamped 2.0.0 in waves with a health check; then three releases
// that cannot run, one after the other: one that exits at once, one that
// never registers, and a corrupt executable. Each fails on the canary:
// the device brings 2.0.0 back by itself, the rollout says why, and the
// other devices never see the release.
func TestAFleetUpdatesItsAgentInWavesAndEveryBadReleaseIsRolledBack(t *testing.T) {
	u := newUpdates(t, stampedAgent(t, "1.0.0"))
	var ids []string
	for i := range 10 {
		id := fmt.Sprintf("kiosk-%02d", i)
		ids = append(ids, id)
		u.add(id, map[string]string{"site": "lab"}, "")
	}
	for _, id := range ids {
		u.waitOnline(id, true)
	}
	v2, err := os.ReadFile(stampedAgent(t, "2.0.0"))
	require.NoError(t, err)
	good := u.publish("2.0.0", v2)

	spec := map[string]any{"name": "agents", "selector": map[string]any{"site": "lab"}, "agent": "2.0.0", "agent_trial": "40s",
		"health": health, "waves": []any{1, "50%", "100%"}, "max_failures": 0, "device_timeout": "2m"}
	require.Equal(t, 1, u.rollout(spec))
	r := u.waitFor("agents", "done", func(r api.Rollout) bool { return r.State == api.RolloutDone })
	assert.Equal(t, 10, r.Counts[api.DeviceDone], "%+v", r.Devices)
	assert.Equal(t, "2.0.0", r.Agent)
	for _, id := range ids {
		u.runs(id, "2.0.0")
		_, rep := u.report(id)
		assert.Equal(t, good.SHA256, rep.Running, id)
	}

	bad := []struct {
		version, why string
		body         []byte
	}{
		{"3.0.0-exits", "exited with status 3 before it was committed", script("exit 3")},
		{"3.0.1-hangs", "not committed within 5s: it never registered", script("exec sleep 600")},
		{"3.0.2-corrupt", "could not be started: ", bytes.Repeat([]byte{0x7f, 'E', 'L', 'F', 0xde, 0xad}, 1000)},
	}
	for i, b := range bad {
		t.Run(b.version, func(t *testing.T) {
			u.publish(b.version, b.body)
			spec["agent"], spec["agent_trial"] = b.version, "5s"
			require.Equal(t, 2+i, u.rollout(spec))
			r := u.waitFor("agents", "paused on the canary's failure", func(r api.Rollout) bool {
				return r.State == api.RolloutPaused && r.Counts[api.DeviceFailed] == 1
			})
			failed := devicesIn(r, api.DeviceFailed)
			require.Len(t, failed, 1)
			row := r.Devices[slices.IndexFunc(r.Devices, func(d api.RolloutDevice) bool { return d.State == api.DeviceFailed })]
			assert.Contains(t, row.Error, "agent "+b.version+" was rolled back on the device: "+b.why)
			assert.Contains(t, r.Reason, b.why)
			for _, id := range ids {
				u.runs(id, "2.0.0") // the canary came back by itself; the rest never changed
			}
			_, rep := u.report(failed[0])
			require.NotNil(t, rep.Failed)
			assert.Equal(t, b.version, rep.Failed.Version)
		})
	}

	t.Run("a release signed by a key the devices do not trust is refused before its download", func(t *testing.T) {
		_, other, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		u.publishSigned("3.1.0-untrusted", append(slices.Clone(v2), 0), other)
		spec["agent"], spec["agent_trial"] = "3.1.0-untrusted", "40s"
		u.rollout(spec)
		r := u.waitFor("agents", "paused on the canary's failure", func(r api.Rollout) bool {
			return r.State == api.RolloutPaused && r.Counts[api.DeviceFailed] == 1 && strings.Contains(r.Reason, "untrusted")
		})
		assert.Contains(t, r.Reason, "release 3.1.0-untrusted refused: release is signed by a key this device does not trust")
		for _, id := range ids {
			u.runs(id, "2.0.0")
		}
	})

	t.Run("a device with no release for its platform is skipped, saying why", func(t *testing.T) {
		other := map[string]string{"arm64": "amd64"}[runtime.GOARCH]
		if other == "" {
			other = "arm64"
		}
		body := append(slices.Clone(v2), 1)
		sum := sha256.Sum256(body)
		r := agentrelease.Sign(agentrelease.Release{Version: "3.2.0", OS: "linux", Arch: other, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(body))}, u.key)
		_, err := u.api.PublishRelease(context.Background(), r, bytes.NewReader(body))
		require.NoError(t, err)
		spec["agent"] = "3.2.0"
		u.rollout(spec)
		out := u.waitFor("agents", "done, every device skipped", func(r api.Rollout) bool {
			return r.State == api.RolloutDone && r.Counts[api.DeviceSkipped] == 10
		})
		for _, d := range out.Devices {
			assert.Equal(t, "no release of agent 3.2.0 for linux/"+runtime.GOARCH+": publish one with aipctl agent publish", d.Error, d.DeviceID)
		}
		for _, id := range ids {
			u.runs(id, "2.0.0")
		}
	})
}

// A device whose link is cut while its new agent downloads resumes the
// download from the last chunk it kept, and runs the release.
func TestAnAgentDownloadCutMidwayResumesWhereItStopped(t *testing.T) {
	u := newUpdates(t, stampedAgent(t, "1.0.0"))
	proxy := newCutProxy(t, u.addr)
	u.add("kiosk-1", map[string]string{"site": "lab"}, "ws://"+proxy.addr()+"/ws")
	u.waitOnline("kiosk-1", true)
	v2, err := os.ReadFile(stampedAgent(t, "2.0.0"))
	require.NoError(t, err)
	u.publish("2.0.0", v2)
	// Cut within the third chunk's frame: two chunks are kept.
	proxy.cutAfter(int64(2.5 * protocol.ReleaseChunkBytes))
	u.rollout(map[string]any{"name": "agents", "selector": "site=lab", "agent": "2.0.0", "health": health})

	u.waitFor("agents", "done", func(r api.Rollout) bool { return r.State == api.RolloutDone })
	u.runs("kiosk-1", "2.0.0")
	require.False(t, proxy.armed.Load(), "the link was cut mid-download")

	u.resumedAfterTwoChunks("kiosk-1")
}

// An agent killed -9 (a power cut: the supervisor and its child die
// together) during its update's download, and again during its trial,
// comes back each time on a committed version: the download resumes,
// the trial cut short fails and the previous agent answers the health
// check that the release was running, from the outbox the release wrote.
// The device is failed in the rollout, which pauses: a release whose
// trial a crash cut short is not tried again without the operator.
func TestAnAgentKilledDuringItsUpdateRunsACommittedVersionAndLosesNoCommand(t *testing.T) {
	u := newUpdates(t, stampedAgent(t, "1.0.0"))
	proxy := newCutProxy(t, u.addr)
	p := u.add("kiosk-1", map[string]string{"site": "lab"}, "ws://"+proxy.addr()+"/ws")
	u.waitOnline("kiosk-1", true)
	v2, err := os.ReadFile(stampedAgent(t, "2.0.0"))
	require.NoError(t, err)
	rel := u.publish("2.0.0", v2)

	// The link is lost within the third chunk, and stays lost: the
	// device is killed with two chunks of the release on its disk.
	proxy.hold()
	proxy.cutAfter(int64(2.5 * protocol.ReleaseChunkBytes))
	u.rollout(map[string]any{"name": "agents", "selector": "site=lab", "agent": "2.0.0", "agent_trial": "60s",
		"health": []any{map[string]any{"tool": "pause", "parameters": map[string]any{"ms": 20000}}}})
	u.waitOnline("kiosk-1", false)
	p.kill()
	proxy.release()
	p.start()

	// Killed again while the release runs on trial, its health check in
	// flight.
	require.Eventually(t, func() bool {
		_, rep := u.report("kiosk-1")
		return rep.Trial && rep.Running == rel.SHA256
	}, testenv.Slowdown*60*time.Second, 10*time.Millisecond, "the release never ran on trial")
	require.Eventually(t, func() bool { return p.count("first_tool=pause") == 1 }, testenv.Slowdown*60*time.Second, 10*time.Millisecond)
	p.kill()
	p.start()

	r := u.waitFor("agents", "paused on the device's failure", func(r api.Rollout) bool { return r.State == api.RolloutPaused })
	require.Len(t, r.Devices, 1)
	assert.Equal(t, api.DeviceFailed, r.Devices[0].State)
	assert.Contains(t, r.Devices[0].Error, "health checks failed: step 1 (pause) failed: agent restarted while the command ran",
		"the health check in flight was answered by the agent that came back")
	u.runs("kiosk-1", "1.0.0")
	_, rep := u.report("kiosk-1")
	require.NotNil(t, rep.Failed, "the trial cut short is reported")
	assert.Equal(t, "the device or its supervisor restarted during the trial", rep.Failed.Reason)
	u.resumedAfterTwoChunks("kiosk-1")
}

// resumedAfterTwoChunks checks that device id's download went on where
// its copy ended after a cut within the third chunk: the first two
// chunks went once, the third went again.
func (u *updates) resumedAfterTwoChunks(id string) {
	u.t.Helper()
	entries, err := u.api.Audit(context.Background(), api.AuditQuery{Device: id})
	require.NoError(u.t, err)
	sent := map[int64]int{}
	for _, e := range entries {
		var p struct {
			Offset int64 `json:"offset"`
			Data   any   `json:"data"`
		}
		if e.Tool == protocol.ToolKey(protocol.ToolAction, protocol.StageReleaseName) && json.Unmarshal(e.Parameters, &p) == nil && p.Data != nil {
			sent[p.Offset]++
		}
	}
	assert.Equal(u.t, 1, sent[0], "the first chunk went once: %v", sent)
	assert.Equal(u.t, 1, sent[protocol.ReleaseChunkBytes], "the second chunk went once: %v", sent)
	assert.Contains(u.t, sent, int64(2*protocol.ReleaseChunkBytes), "the third, which the cut caught, went: %v", sent)
}

// In a cluster, a device whose link is cut mid-download and that links
// again through another node resumes there, from the last chunk it kept.
func TestAnAgentDownloadCutMidwayResumesThroughAnotherNode(t *testing.T) {
	sc := newServerCluster(t, 0)
	for i := range 2 {
		sc.startNode(fmt.Sprintf("node-%d", i), "--rollout-sweep", "1h")
	}
	u := newUpdatesOn(t, stampedAgent(t, "1.0.0"), sc.nodes[0].api, sc.nodes[0].addr)
	lb := newCutProxy(t, sc.nodes[0].addr) // a load balancer in front of the nodes
	u.add("kiosk-1", map[string]string{"site": "lab"}, "ws://"+lb.addr()+"/ws")
	sc.waitLinked(sc.nodes[0], "kiosk-1", "node-0")
	v2, err := os.ReadFile(stampedAgent(t, "2.0.0"))
	require.NoError(t, err)
	u.publish("2.0.0", v2)

	lb.hold()
	lb.cutAfter(int64(2.5 * protocol.ReleaseChunkBytes))
	u.rollout(map[string]any{"name": "agents", "selector": "site=lab", "agent": "2.0.0", "health": health})
	u.waitOnline("kiosk-1", false)
	lb.retarget(sc.nodes[1].addr)
	lb.release()
	sc.waitLinked(sc.nodes[0], "kiosk-1", "node-1")

	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range sc.nodes {
				for line := range strings.Lines(n.logs.String()) {
					if strings.Contains(line, "rollout") || strings.Contains(line, "kiosk-1") {
						t.Log(line)
					}
				}
			}
			b, _ := os.ReadFile(u.agents["kiosk-1"].log)
			t.Log(string(b[:min(len(b), 20000)]))
		}
	})
	u.waitFor("agents", "done", func(r api.Rollout) bool { return r.State == api.RolloutDone })
	u.runs("kiosk-1", "2.0.0")
	u.resumedAfterTwoChunks("kiosk-1")
}

// Rolling back a rollout of an agent brings each device back to the
// agent it ran before, which it kept: here the first revision names the
// version the devices were flashed with, never published, and a rollback
// to it takes the second's release back.
func TestRollingBackAnAgentRolloutBringsBackTheAgentEachDeviceRanBefore(t *testing.T) {
	u := newUpdates(t, stampedAgent(t, "1.0.0"))
	ids := []string{"kiosk-1", "kiosk-2", "kiosk-3"}
	for _, id := range ids {
		u.add(id, map[string]string{"site": "lab"}, "")
	}
	for _, id := range ids {
		u.waitOnline(id, true)
	}
	v2, err := os.ReadFile(stampedAgent(t, "2.0.0"))
	require.NoError(t, err)
	u.publish("2.0.0", v2)
	// The first revision names the version the devices were flashed
	// with, which was never published: it asks nothing of them.
	spec := map[string]any{"name": "agents", "selector": "site=lab", "agent": "1.0.0", "health": health}
	require.Equal(t, 1, u.rollout(spec))
	u.waitFor("agents", "done", func(r api.Rollout) bool { return r.State == api.RolloutDone && r.Revision == 1 })
	spec["agent"] = "2.0.0"
	require.Equal(t, 2, u.rollout(spec))
	u.waitFor("agents", "done", func(r api.Rollout) bool { return r.State == api.RolloutDone && r.Revision == 2 })
	for _, id := range ids {
		u.runs(id, "2.0.0")
	}

	_, err = u.api.ControlRollout(context.Background(), "agents", "rollback")
	require.NoError(t, err)
	r := u.waitFor("agents", "rolled back", func(r api.Rollout) bool { return r.State == api.RolloutRolledBack })
	assert.Equal(t, 3, r.Counts[api.DeviceDone], "none skipped: %+v", r.Devices)
	for _, id := range ids {
		u.runs(id, "1.0.0")
		_, rep := u.report(id)
		assert.Empty(t, rep.Running, "%s runs its flashed build", id)
		assert.Nil(t, rep.Failed, "%s took the release back; no trial failed", id)
		assert.True(t, u.agents[id].logged(`msg="agent release reverted: restarting into the agent it replaced"`), id)
	}
}

// A trial that fails after its change gave up waiting (device_timeout
// passed while the device was away) fails the device when it links
// again: the release is not downloaded and tried over and over.
func TestATrialThatFailsWhileItsChangeIsAwayFailsTheDeviceOnce(t *testing.T) {
	u := newUpdates(t, stampedAgent(t, "1.0.0"))
	p := u.add("kiosk-1", map[string]string{"site": "lab"}, "")
	u.waitOnline("kiosk-1", true)
	// A release of some megabytes, whose download starts the trial late
	// enough that the change's device_timeout passes before the trial's
	// bound: the device is away then, on trial, and the change waits.
	padding := make([]byte, 6<<20)
	_, err := rand.Read(padding)
	require.NoError(t, err)
	u.publish("3.0.1-hangs", append(script("exec sleep 600\n#"), base64.StdEncoding.EncodeToString(padding)...))
	u.rollout(map[string]any{"name": "agents", "selector": "site=lab", "agent": "3.0.1-hangs", "agent_trial": "5s",
		"device_timeout": "5200ms", "health": health})
	r := u.waitFor("agents", "paused on the device's failure", func(r api.Rollout) bool { return r.State == api.RolloutPaused })
	require.Len(t, r.Devices, 1)
	assert.Equal(t, api.DeviceFailed, r.Devices[0].State)
	assert.Contains(t, r.Devices[0].Error, "agent 3.0.1-hangs was rolled back on the device: not committed within 5s: it never registered")
	u.runs("kiosk-1", "1.0.0")
	assert.Equal(t, 1, p.count(`msg="release started on trial"`), "tried once")
}
