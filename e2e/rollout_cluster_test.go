package e2e

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// agentsForRollouts starts an agent for each of ids, enrolled with
// labels[i], linked to node i%3 through a proxy per node that stands for
// a load balancer, and waits until each is linked there.
func (sc *serverCluster) agentsForRollouts(t *testing.T, f *fleet, ids []string, labels []map[string]string) []*cutProxy {
	lbs := make([]*cutProxy, len(sc.nodes))
	for i, node := range sc.nodes {
		lbs[i] = newCutProxy(t, node.addr)
	}
	for i, id := range ids {
		f.enrollVia(t, sc.nodes[0], id, labels[i])
		f.startAt(t, lbs[i%len(lbs)].addr(), id)
	}
	for i, id := range ids {
		sc.waitLinked(sc.nodes[0], id, fmt.Sprintf("node-%d", i%len(lbs)))
	}
	return lbs
}

// enrollVia enrolls id with labels through via, for startAt.
func (f *fleet) enrollVia(t *testing.T, via *serverProcess, id string, labels map[string]string) {
	resp, err := via.api.Enroll(context.Background(), api.EnrollRequest{ID: id, Labels: labels})
	require.NoError(t, err)
	token := filepath.Join(t.TempDir(), id+".token")
	require.NoError(t, os.WriteFile(token, []byte(resp.Token), 0o600))
	f.mu.Lock()
	f.agents[id] = &fleetAgent{id: id, token: token, data: t.TempDir(), applied: map[string]int{}, appliedAt: map[string]time.Time{}}
	f.mu.Unlock()
}

// startAt starts enrolled id's agent, linked to addr; it trusts the test
// key, and f counts what it applies.
func (f *fleet) startAt(t *testing.T, addr, id string) {
	f.mu.Lock()
	a := f.agents[id]
	f.mu.Unlock()
	cfg := agent.Config{
		ID: id, ServerURL: "ws://" + addr + "/ws", TokenFile: a.token, DataDir: a.data,
		CompileCacheDir: sharedCompileCache(t), TrustedKeys: []ed25519.PublicKey{testenv.TestKey(t)},
		HeartbeatInterval: 100 * time.Millisecond, ShutdownGrace: 500 * time.Millisecond, Logger: testLogger().With("device", id),
	}
	onRecord(func(r slog.Record) { f.logged(id, r) })(&cfg)
	a.run = runAgent(t, cfg)
}

// logCount is how many lines of each node's log say msg about rollout
// name, with attr among their attributes, by node.
func (sc *serverCluster) logCount(msg, name, attr string) []int {
	out := make([]int, len(sc.nodes))
	for i, n := range sc.nodes {
		for line := range strings.Lines(n.logs.String()) {
			if strings.Contains(line, `msg="`+msg+`"`) && strings.Contains(line, " rollout="+name+" ") && strings.Contains(line, " "+attr) {
				out[i]++
			}
		}
	}
	return out
}

func sum(counts []int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// In cluster mode one node leads a rollout, and each device's change
// runs through the node that holds its link. A rollout in three waves,
// each approved by hand, over six devices on three nodes: the second
// wave is approved through a node that does not lead it, which starts
// no change of its own. Then the leader's node is killed (kill -9) while
// the rollout waits for the last approval; it is approved through a
// survivor, which takes the lead once the dead node is found dead, and
// finishes it: every selected device is done, each applied the revision
// once, and each device's change ran once, by one leader at a time.
// Events alone move it (the sweep is an hour): the death, the
// approvals, the devices that register on other nodes.
func TestALeadersNodeKilledMidRolloutIsFinishedByAnother(t *testing.T) {
	sc := newServerCluster(t, 0)
	for i := range 3 {
		sc.startNode(fmt.Sprintf("node-%d", i), "--rollout-sweep", "1h")
	}
	f := newFleet(sc.nodes[0].api, "")
	var ids, lobby []string
	var labels []map[string]string
	for i := range 9 {
		id := fmt.Sprintf("dev-%d", i)
		site := "depot"
		if i%3 != 2 {
			site = "lobby"
			lobby = append(lobby, id)
		}
		ids, labels = append(ids, id), append(labels, map[string]string{"site": site})
	}
	lbs := sc.agentsForRollouts(t, f, ids, labels)

	ctx := context.Background()
	greet := fleetTool(t, "echo", "greet", "1")
	mod, err := sc.nodes[0].api.PutModule(ctx, greet)
	require.NoError(t, err)
	spec := map[string]any{"name": "kiosk", "selector": "site=lobby", "tools": []string{mod.SHA256},
		"waves": []any{1, 3, "100%"}, "between_waves": "approve", "device_timeout": "1m",
		"health": []any{map[string]any{"tool": "greet", "parameters": map[string]any{"name": "probe"}}}}
	_, err = sc.nodes[0].api.ApplyRollout(ctx, must(json.Marshal(spec)))
	require.NoError(t, err)
	f.waitState(t, "kiosk", api.RolloutApproval)

	took := sc.logCount("took the lead of the rollout", "kiosk", "")
	assert.Equal(t, 1, sum(took), "one node leads the rollout: %v", took)
	leader := slices.Index(took, slices.Max(took))
	other, survivor := sc.nodes[(leader+1)%3], sc.nodes[(leader+2)%3]
	f.api = survivor.api // it outlives the leader
	_, err = other.api.ControlRollout(ctx, "kiosk", "resume")
	require.NoError(t, err)
	r := f.waitState(t, "kiosk", api.RolloutApproval)
	require.Equal(t, 1, r.Wave, "the second wave is through")
	changed := sc.logCount("rollout device changed", "kiosk", "state=done")
	assert.Equal(t, []int{3}, slices.DeleteFunc(changed, func(n int) bool { return n == 0 }),
		"the leader alone changed the first two waves' devices, once each: %v", changed)

	killed := time.Now()
	sc.nodes[leader].kill(t)
	lbs[leader].retarget(survivor.addr)
	t.Logf("killed node-%d, the rollout's leader, as it waits for approval", leader)
	_, err = survivor.api.ControlRollout(ctx, "kiosk", "resume")
	require.NoError(t, err)
	r = f.waitState(t, "kiosk", api.RolloutDone)
	t.Logf("the last wave approved and done %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	assert.ElementsMatch(t, lobby, devicesIn(r, api.DeviceDone))
	f.appliedOnce(t, "kiosk@1", lobby)
	took = sc.logCount("took the lead of the rollout", "kiosk", "")
	assert.Equal(t, 2, sum(took), "one survivor took the lead: %v", took)
	changed = sc.logCount("rollout device changed", "kiosk", "state=done")
	assert.Equal(t, len(lobby), sum(changed), "each device's change ran once, by one leader at a time: %v", changed)

	// The leader hears what happens on the other node: a device that
	// registers there (enrolled first: it waits for its link), and one
	// relabelled through it.
	took[leader] = 0
	notLeading := sc.nodes[3-leader-slices.Index(took, 1)]
	f.enrollVia(t, notLeading, "dev-9", map[string]string{"site": "lobby"})
	f.waitCount(t, "kiosk", api.DeviceWaiting, 1)
	f.startAt(t, notLeading.addr, "dev-9")
	lobby = append(lobby, "dev-9")
	f.waitCount(t, "kiosk", api.DeviceDone, len(lobby))
	_, err = notLeading.api.Label(ctx, "dev-2", api.LabelRequest{Set: map[string]string{"site": "lobby"}})
	require.NoError(t, err)
	lobby = append(lobby, "dev-2")
	r = f.waitCount(t, "kiosk", api.DeviceDone, len(lobby))
	assert.ElementsMatch(t, lobby, devicesIn(r, api.DeviceDone))
	f.appliedOnce(t, "kiosk@1", lobby)
}
