package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/internal/blackhole"
	"github.com/edgeaip/edgeaip/internal/natstest"
	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/cluster"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// linkedTo enrolls device id through ts's cluster and links it to node.
func (tc *testCluster) linkedTo(node *testServer, enrolledBy *testServer, id string) (*rawClient, string) {
	tc.t.Helper()
	token := enrolledBy.enroll(id)
	dev := node.mustDial(token)
	dev.register(id, tool("stock", "echo", protocol.ToolAction))
	return dev, token
}

// requireOneDoneCommand requires the task of command resp to have
// completed with it, recorded once, on time.
func requireOneDoneCommand(t *testing.T, ts *testServer, resp api.CommandResponse) {
	t.Helper()
	task := ts.waitTask(resp.SessionID)
	assert.Equal(t, api.StateCompleted, task.State)
	require.Len(t, task.Commands, 1)
	assert.Equal(t, resp.ResponseID, task.Commands[0].ResponseID)
	assert.Equal(t, "done", task.Commands[0].Status)
	assert.False(t, task.Commands[0].Late)
}

// A command through node A for a device linked to node B goes to B over
// NATS, and B sends it on the link; its results, recorded by B, come back
// to A with the same response_id and call_ids.
func TestACommandThroughOneNodeRunsOnADeviceLinkedToAnother(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.node("a"), tc.node("b")
	dev, _ := tc.linkedTo(b, a, "kiosk-1")

	out := a.echoInBackground("kiosk-1")
	cmd := dev.nextCommand()
	dev.answer(cmd, protocol.ResultSuccess, "res-1")
	resp := <-out
	require.Equal(t, "success", resp.Status, "%+v", resp)
	assert.Equal(t, cmd.ResponseID, resp.ResponseID)
	require.Len(t, resp.Results, 1)
	assert.Equal(t, cmd.Actions[0].CallID, resp.Results[0].CallID)
	requireOneDoneCommand(t, a, resp)
	fams := a.scrape()
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_cluster_cross_node_commands_total", "outcome", "sent"))
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_cluster_node", "node", "a", "epoch", "1"))
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_cluster_nats_connected"))
	assert.Equal(t, 1.0, metric(t, b.scrape(), "edgeaip_cluster_device_leases"))

	// And the node holding the link still serves its own.
	local := b.echoInBackground("kiosk-1")
	cmd = dev.nextCommand()
	dev.answer(cmd, protocol.ResultSuccess, "res-2")
	assert.Equal(t, "success", (<-local).Status)
}

// The device moves from B to C while its command is out: C takes its
// lease, B closes its stale link, A sends the command again to C with the
// same response_id and call_ids, and it is recorded once. A delivery
// under B's stale lease epoch is refused.
func TestADeviceThatMovesToAnotherNodeGetsItsCommandThereOnce(t *testing.T) {
	tc := newTestCluster(t)
	a, b, c := tc.node("a"), tc.node("b"), tc.node("c")
	onB, token := tc.linkedTo(b, a, "kiosk-1")
	stale := onB.linkLease(b)

	out := a.echoInBackground("kiosk-1")
	first := onB.nextCommand()

	onC := c.mustDial(token)
	onC.register("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	onB.requireClosed() // B was told over NATS, and closed its link
	again := onC.nextCommand()
	assert.Equal(t, first.ResponseID, again.ResponseID)
	assert.Equal(t, first.Actions[0].CallID, again.Actions[0].CallID)
	onC.answer(again, protocol.ResultSuccess, "res-1")
	resp := <-out
	require.Equal(t, "success", resp.Status, "%+v", resp)
	requireOneDoneCommand(t, a, resp)

	reply, err := a.srv.cluster.SendCommand(context.Background(), cluster.Command{DeviceID: "kiosk-1", LeaseEpoch: stale,
		From: "a", FromEpoch: 1, Timeout: time.Minute, Message: &first})
	require.NoError(t, err)
	assert.Equal(t, cluster.Stale, reply.Outcome)
	assert.Greater(t, reply.Lease, stale)
	assert.Equal(t, int64(0), b.srv.disp.Leases().(*dispatch.ClusterLinks).HeldEpoch("kiosk-1"), "B holds it no more")
}

// A device between links on its node is between links for every node:
// a command through another node waits for it, and gets to it where it
// registers again.
func TestACommandWaitsForADeviceBetweenLinksOnAnotherNode(t *testing.T) {
	tc := newTestCluster(t)
	a, b, c := tc.node("a"), tc.node("b"), tc.node("c")
	onB, token := tc.linkedTo(b, a, "kiosk-1")
	onB.conn.CloseNow()
	require.Eventually(t, func() bool { return b.srv.reg.Reach("kiosk-1").GraceLeft > 0 }, 5*time.Second, 5*time.Millisecond)

	out := a.echoInBackground("kiosk-1")
	time.Sleep(200 * time.Millisecond) // the command is out, waiting
	onC := c.mustDial(token)
	onC.register("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	cmd := onC.nextCommand()
	onC.answer(cmd, protocol.ResultSuccess, "res-1")
	resp := <-out
	require.Equal(t, "success", resp.Status, "%+v", resp)
	requireOneDoneCommand(t, a, resp)
}

// NATS lost at run time: the node is degraded, refuses new work for
// devices linked elsewhere with 503 naming NATS, and serves its own.
func TestWithoutNATSANodeRefusesCrossNodeWorkAndServesItsOwn(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.node("a"), tc.node("b")
	local, _ := tc.linkedTo(a, a, "kiosk-a")
	tc.linkedTo(b, a, "kiosk-b")
	tc.nats.Stop()
	require.Eventually(t, func() bool { code, _ := a.health(); return code == http.StatusServiceUnavailable }, 5*time.Second, 10*time.Millisecond)

	code, msg := a.apiStatus("POST", "/api/devices/kiosk-b/commands", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "10s"})
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, msg, `device "kiosk-b" is not linked to node "a", and cross-node work is refused: NATS: not connected`)

	out := a.echoInBackground("kiosk-a")
	cmd := local.nextCommand()
	local.answer(cmd, protocol.ResultSuccess, "res-1")
	assert.Equal(t, "success", (<-out).Status)
}

// A NATS link that silently drops every packet (no FIN, no RST: a
// blackhole) is noticed within 15 s with the default pings: the node is
// degraded, naming NATS, and refuses a command for a device linked
// elsewhere at once with 503 naming NATS, rather than let it hang until
// its timeout. Once the link forwards again the node is healthy and
// carries cross-node work again.
func TestANodeNoticesANATSLinkThatDropsEverythingAndRefusesCrossNodeWork(t *testing.T) {
	tc := newTestCluster(t)
	link := blackhole.Start(t, strings.TrimPrefix(tc.nats.URL(), "nats://"))
	a := tc.node("a", func(c *Config) { c.Cluster.NATS = "nats://" + link.Addr() })
	b := tc.node("b")
	dev, _ := tc.linkedTo(b, a, "kiosk-b")
	crossNode := func(res string) {
		t.Helper()
		out := a.echoInBackground("kiosk-b")
		dev.answer(dev.nextCommand(), protocol.ResultSuccess, res)
		require.Equal(t, "success", (<-out).Status)
	}
	crossNode("res-1")

	link.Cut()
	bound := (cluster.DefaultNATSMaxPingsOut + 1) * cluster.DefaultNATSPingInterval
	require.LessOrEqual(t, bound, 15*time.Second)
	var h api.Health
	require.Eventually(t, func() bool {
		var code int
		code, h = a.health()
		return code == http.StatusServiceUnavailable && strings.Contains(h.Cause, "lost: nats: stale connection")
	}, 15*time.Second, 50*time.Millisecond, "a blackholed NATS link not noticed within 15 s: %+v", h)
	assert.Equal(t, "degraded", h.Status)
	assert.Contains(t, h.Cause, "NATS: not connected (RECONNECTING, lost: nats: stale connection: 2 pings 4s apart unanswered)")
	code, msg := a.apiStatus("POST", "/api/devices/kiosk-b/commands", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "10m"})
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, msg, `device "kiosk-b" is not linked to node "a", and cross-node work is refused: NATS: not connected`)

	link.Heal()
	require.Eventually(t, func() bool { code, _ := a.health(); return code == http.StatusOK }, 15*time.Second, 50*time.Millisecond)
	crossNode("res-2")
}

// linkLease is the lease epoch rc's link was registered under on ts.
func (rc *rawClient) linkLease(ts *testServer) int64 {
	rc.t.Helper()
	c := ts.srv.reg.Device(rc.id)
	require.NotNil(rc.t, c)
	return c.LeaseEpoch()
}

// Revoking a device on node A closes its link on node B within a second,
// and fails A's command waiting for it.
func TestRevokingADeviceOnOneNodeClosesItsLinkOnAnotherWithinASecond(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.node("a"), tc.node("b")
	dev, _ := tc.linkedTo(b, a, "kiosk-1")
	out := a.echoInBackground("kiosk-1")
	dev.nextCommand() // out, never answered
	closed := linkClosed(dev)

	require.NoError(t, a.api.Revoke(context.Background(), "kiosk-1"))
	requireWithin(t, closed, "the device's link on another node")
	resp := <-out
	assert.Equal(t, "failure", resp.Status)
	assert.Contains(t, resp.FirstError(), `device "kiosk-1" was revoked`)
	require.Eventually(t, func() bool { return b.srv.disp.Leases().(*dispatch.ClusterLinks).HeldEpoch("kiosk-1") == 0 }, 5*time.Second, 10*time.Millisecond,
		"B gave up the device's lease")
}

// Revoking an identity on node A closes what it opened on node B within
// a second.
func TestRevokingAnIdentityOnOneNodeClosesItsSurfacesOnAnother(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.node("a"), tc.node("b")
	task := quietTask(b)
	ann := a.addIdentity("ann", api.RoleOperator, nil)
	open := b.openSurfaces(ann, "orch-ann", task)
	require.NoError(t, a.api.RevokeIdentity(context.Background(), "ann"))
	open.each(t, "the", requireWithin)
}

// A token rotation asked for on node A reaches the device linked to node
// B, and A answers once the device confirms it there.
func TestATokenRotationThroughOneNodeReachesTheDeviceOnAnother(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.node("a"), tc.node("b")
	dev, old := tc.linkedTo(b, a, "kiosk-1")
	answer := a.rotate("kiosk-1", api.RotateRequest{})
	m := dev.recvType(protocol.ServerRotateToken)
	require.NotEqual(t, old, m.Token)
	dev.keepToken(m)
	assert.Equal(t, api.RotationConfirmed, a.rotated(answer).State)
	again := a.mustDial(m.Token)
	again.register("kiosk-1")
}

// GET /api/cluster lists the nodes, the devices each holds and the
// leases; a dead node is listed not alive, and its devices with it.
func TestTheClusterViewListsNodesDevicesAndLeases(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.node("a"), tc.node("b")
	tc.linkedTo(b, a, "kiosk-1")
	tc.linkedTo(a, a, "kiosk-2")
	late := tc.node("c") // started after the devices linked: it reads their leases
	for _, ts := range []*testServer{a, b, late} {
		devs, err := ts.api.Devices(context.Background())
		require.NoError(t, err)
		require.Len(t, devs, 2)
		assert.True(t, devs[0].Online && devs[1].Online, "online through any node: %+v", devs)
		var clients api.Clients
		require.NoError(t, ts.api.Do(context.Background(), "GET", "/api/clients", nil, &clients))
		assert.Equal(t, []string{"kiosk-1", "kiosk-2"}, clients.OnlineClients)
	}
	require.NoError(t, late.srv.Close())
	var view api.Cluster
	require.NoError(t, a.api.Do(context.Background(), "GET", "/api/cluster", nil, &view))
	assert.Equal(t, "a", view.Node)
	require.Len(t, view.Nodes, 3)
	view.Nodes = view.Nodes[:2] // c, which left, is last
	assert.Equal(t, []string{"kiosk-2"}, view.Nodes[0].Devices)
	assert.Equal(t, []string{"kiosk-1"}, view.Nodes[1].Devices)
	assert.True(t, view.Nodes[1].Alive)
	assert.Equal(t, "b:8700", view.Nodes[1].Address)
	require.Len(t, view.Leases, 2)
	assert.Equal(t, "kiosk-1", view.Leases[0].DeviceID)
	assert.Equal(t, "b", view.Leases[0].NodeID)
	assert.Equal(t, int64(1), view.Leases[0].Epoch)

	b.srv.Close()
	require.NoError(t, a.api.Do(context.Background(), "GET", "/api/cluster", nil, &view))
	assert.False(t, view.Nodes[1].Alive)
	assert.Equal(t, "gone", view.Nodes[1].State)
	assert.Empty(t, view.Nodes[1].Devices)
}

// A plan dispatched through node A (UFO's /api/dispatch) runs on a device
// linked to node B; a device's refusal of a command, on B, fails A's
// command at once.
func TestAPlanThroughOneNodeRunsOnADeviceOnAnotherAndARefusalComesBack(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.node("a"), tc.node("b")
	dev, _ := tc.linkedTo(b, a, "kiosk-1")
	resp := dispatchPlan(t, a, "kiosk-1", "steps: [{tool: echo, timeout: 1m}]")
	dev.answer(dev.nextCommand(), protocol.ResultSuccess, "res-1")
	assert.Equal(t, api.StateCompleted, a.waitTask(resp.SessionID).State)

	out := a.echoInBackground("kiosk-1")
	cmd := dev.nextCommand()
	dev.send(protocol.ClientMessage{Type: protocol.ClientError, ClientID: "kiosk-1", PrevResponseID: cmd.ResponseID, Error: "cannot decode it"})
	refused := <-out
	assert.Equal(t, "failure", refused.Status)
	assert.Contains(t, refused.FirstError(), `device "kiosk-1" refused the command: cannot decode it`)
}

// markAllDead marks every node of tc dead in the store, as if each had
// been silent: each finds at its next heartbeat that it lost its lease.
func (tc *testCluster) markAllDead() {
	tc.t.Helper()
	st, err := store.Open(context.Background(), tc.store, store.Options{})
	require.NoError(tc.t, err)
	defer st.Close()
	require.NoError(tc.t, st.Write(context.Background(), func(tx *store.Tx) error {
		_, err := tx.Cluster().MarkDeadNodes(-time.Hour)
		return err
	}))
}

// A node the cluster took as dead (a long pause, say) finds out at its
// next heartbeat: it closes its device links and refuses new ones, so
// that its devices go to other nodes.
func TestANodeThatLostItsLeaseSendsItsDevicesAwayAndRejoins(t *testing.T) {
	tc := newTestCluster(t)
	a := tc.node("a")
	dev, token := tc.linkedTo(a, a, "kiosk-1")
	closed := linkClosed(dev)
	tc.markAllDead()
	requireWithinOf(t, closed, 5*time.Second, "the device's link on a node that lost its lease")

	// It rejoins at a new epoch by itself, and serves the device again.
	require.Eventually(t, func() bool { _, epoch := a.srv.cluster.Self(); return epoch == 2 }, 10*time.Second, 10*time.Millisecond)
	nodeSeries := a.scrape()["edgeaip_cluster_node"].GetMetric()
	require.Len(t, nodeSeries, 1, "one node, at one epoch")
	assert.Equal(t, 1.0, metric(t, a.scrape(), "edgeaip_cluster_node", "node", "a", "epoch", "2"), "the metric names the new epoch")
	code, h := a.health()
	assert.Equal(t, http.StatusOK, code, h.Cause)
	again := a.mustDial(token)
	again.register("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	again.serveOK()
	resp, err := a.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
	require.NoError(t, err)
	assert.True(t, resp.Succeeded(), resp.FirstError())
	row, err := a.srv.tasks.Task(t.Context(), resp.SessionID)
	require.NoError(t, err)
	assert.Equal(t, store.Owner{Node: "a", Epoch: 2}, row.Owner, "its task is the new epoch's, which no node takes as dead")
}

// A node that cannot record its heartbeat soon doubts that it holds its
// lease: the others may take it as dead, and run what it holds. It then
// takes no new work, answering 503 naming why, rather than record a task
// that another node may run too.
func TestANodeNotSureOfItsLeaseTakesNoNewWork(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.node("a"), tc.node("b")
	dev, _ := tc.linkedTo(b, b, "kiosk-1")
	dev.serveOK()
	// The store refuses a's heartbeats (and b's sweep of a's row): as in
	// a pause, a cannot know whether it still holds its lease.
	exec := tc.sql(t)
	exec(`CREATE FUNCTION refuse_a() RETURNS trigger AS $$ BEGIN
		IF NEW.node_id = 'a' THEN RAISE EXCEPTION 'the test refuses node a'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`)
	exec(`CREATE TRIGGER refuse_a BEFORE UPDATE ON cluster_nodes FOR EACH ROW EXECUTE FUNCTION refuse_a()`)
	require.Eventually(t, func() bool { return a.srv.cluster.LeaseDoubt() != "" }, 10*time.Second, 10*time.Millisecond)

	code, msg := a.apiStatus("POST", "/api/devices/kiosk-1/commands", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, msg, `new work refused: cluster: node "a"`)
	exec(`DROP TRIGGER refuse_a ON cluster_nodes`)

	require.Eventually(t, func() bool { code, _ := a.health(); return code == http.StatusOK }, 10*time.Second, 10*time.Millisecond,
		"it serves again once it records a heartbeat, or has rejoined")
	resp, err := a.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
	require.NoError(t, err)
	assert.True(t, resp.Succeeded(), resp.FirstError())
}

// A command already in flight on a node cut off from the store waits for
// the store's writer, whose statement hangs on the wire: once the node
// doubts its lease, it gives up with the 503 that new work gets, and
// nothing of it is recorded, then or when the store answers again.
func TestACommandWaitingForAStoreThatHangsGivesUpWhenItsNodeDoubtsItsLease(t *testing.T) {
	tc := newTestCluster(t)
	link := blackhole.StartTo(t, "unix", pgtest.Socket(t, tc.store))
	a := tc.node("a", func(c *Config) {
		c.Store.URL = pgtest.Through(t, tc.store, link.Addr())
		c.Cluster.Heartbeat, c.Cluster.DeadAfter = 0, 0 // the defaults: a command is in flight well before the doubt
	})
	t.Cleanup(link.Heal) // before the node stops, which waits for its writer
	dev, _ := tc.linkedTo(a, a, "kiosk-1")
	dev.serveOK()
	echo := api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}}
	resp, err := a.api.Command(context.Background(), "kiosk-1", echo)
	require.NoError(t, err)
	require.True(t, resp.Succeeded(), resp.FirstError())

	link.Cut() // the writer's next statement hangs on the wire
	// Without an Idempotency-Key, whose read would hang as well: this
	// command goes as far as the writer.
	var ans keyedAnswer
	select {
	case ans = <-a.postKeyedAsync("/api/devices/kiosk-1/commands", "", echoCommand):
	case <-time.After(30 * time.Second):
		t.Fatal("a command waiting for a store that hangs was not answered")
	}
	assert.Equal(t, http.StatusServiceUnavailable, ans.code)
	assert.Contains(t, string(ans.body), `new work refused: cluster: node \"a\" has recorded no heartbeat`)
	assert.Contains(t, a.logs.String(), "reason=not_recorded", "it was in flight, waiting for the store, when the doubt began")

	link.Heal()
	require.Eventually(t, func() bool { return a.srv.cluster.LeaseDoubt() == "" }, 10*time.Second, 10*time.Millisecond)
	resp, err = a.api.Command(context.Background(), "kiosk-1", echo)
	require.NoError(t, err)
	assert.True(t, resp.Succeeded(), resp.FirstError())
	assert.Equal(t, 2, a.taskCount(), "the two that succeeded: nothing of the one that gave up")
}

// requireWithinOf requires ch to close within d.
func requireWithinOf(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s stayed open more than %s", what, d)
	}
}

// A device that shuts down on purpose (1001) on node B before it answers
// a command from node A fails it at once, as on a single node.
func TestADeviceThatShutsDownOnAnotherNodeFailsItsCommandAtOnce(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.node("a"), tc.node("b")
	dev, _ := tc.linkedTo(b, a, "kiosk-1")
	out := a.echoInBackground("kiosk-1")
	dev.nextCommand()
	require.NoError(t, dev.conn.Close(websocket.StatusGoingAway, "agent shutting down"))
	select {
	case resp := <-out:
		assert.Equal(t, "failure", resp.Status)
		assert.Contains(t, resp.FirstError(), `device "kiosk-1" shut down before it answered`)
	case <-time.After(10 * time.Second):
		t.Fatal("the command waited on for a device that shut down")
	}
}

// A task cancelled through node A stops its command on a device linked
// to node B: the cancellation goes to B over NATS, as the command did.
func TestCancellingATaskThroughOneNodeStopsItsCommandOnAnother(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.node("a"), tc.node("b")
	dev, _ := tc.linkedTo(b, a, "kiosk-1")
	d := dispatchPlan(t, a, "kiosk-1", `steps: [{tool: echo, timeout: 1m}]`)
	cmd := dev.nextCommand()

	task, err := a.api.CancelTask(context.Background(), d.SessionID)
	require.NoError(t, err)
	assert.Equal(t, api.StateCancelled, task.State)
	stop := dev.recvType(protocol.ServerCancelCommand)
	assert.Equal(t, cmd.ResponseID, stop.ResponseID)
	assert.Equal(t, "cancelled by admin", stop.Error)
}

// A single command through node A, cancelled there, ends cancelled, as a
// plan does, when the device linked to node B answers the cancellation
// with its failures: B records them, and the session's end with them,
// knowing A stopped the command.
func TestACommandCancelledThroughOneNodeEndsCancelledWhenTheDeviceOnAnotherAnswers(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.node("a"), tc.node("b")
	dev, _ := tc.linkedTo(b, a, "kiosk-1")
	out := a.echoInBackground("kiosk-1")
	cmd := dev.nextCommand()
	var id string
	require.Eventually(t, func() bool {
		running, err := a.api.Tasks(context.Background(), api.StateRunning, 10)
		require.NoError(t, err)
		if len(running) == 1 {
			id = running[0].SessionID
		}
		return id != ""
	}, 10*time.Second, 10*time.Millisecond)

	cancelled := make(chan api.Task, 1)
	go func() {
		task, err := a.api.CancelTask(context.Background(), id)
		assert.NoError(t, err)
		cancelled <- task
	}()
	dev.recvType(protocol.ServerCancelCommand)
	dev.answer(cmd, protocol.ResultFailure, "res-1")
	<-out
	assert.Equal(t, api.StateCancelled, (<-cancelled).State)
	var task api.Task
	require.NoError(t, a.api.Do(context.Background(), "GET", "/api/tasks/"+id, nil, &task))
	assert.Equal(t, api.StateCancelled, task.State, task.Error)
}

// A command through node A that the device linked to node B does not
// answer in time fails saying so, naming B: its link did not drop.
func TestACommandOnAnotherNodeThatTimesOutSaysWhereItWaited(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.node("a"), tc.node("b")
	dev, _ := tc.linkedTo(b, a, "kiosk-1")
	out := make(chan api.CommandResponse, 1)
	go func() {
		out <- a.command("kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "500ms"})
	}()
	dev.nextCommand() // and never answered
	resp := <-out
	assert.Equal(t, "failure", resp.Status)
	assert.Equal(t, `device "kiosk-1", linked to node "b", did not answer within 500ms; `+dispatch.MayStillRun, resp.FirstError())
}

// nodeBehind starts node id of tc with its NATS link through a proxy
// that the test can cut, pinging NATS every ping.
func (tc *testCluster) nodeBehind(id string, ping time.Duration) (*testServer, *blackhole.Proxy) {
	tc.t.Helper()
	link := blackhole.Start(tc.t, strings.TrimPrefix(tc.nats.URL(), "nats://"))
	return tc.node(id, func(c *Config) { c.Cluster.NATS, c.Cluster.NATSPingInterval = "nats://"+link.Addr(), ping }), link
}

// A command through node A whose NATS link drops everything, before A
// notices, is not confirmed by B, which holds the device's link: it fails
// naming NATS and B, not as if the device had not answered.
func TestACommandThatNATSDidNotCarryFailsNamingNATS(t *testing.T) {
	tc := newTestCluster(t)
	a, link := tc.nodeBehind("a", time.Hour)
	b := tc.node("b")
	dev, _ := tc.linkedTo(b, a, "kiosk-1")
	warm := a.echoInBackground("kiosk-1")
	dev.answer(dev.nextCommand(), protocol.ResultSuccess, "res-1")
	require.Equal(t, "success", (<-warm).Status)

	link.Cut()
	resp := a.command("kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "1s"})
	assert.Equal(t, "failure", resp.Status)
	assert.Equal(t, `command for device "kiosk-1" not confirmed sent within 1s: NATS: node "b", which holds the device's link, did not answer over NATS; `+
		dispatch.MayStillRun, resp.FirstError())
}

// A command out on node B when A loses NATS: the device answers on B,
// which records the results, but its word to A is lost with A's link.
// Once A's NATS is back, A reads the results from the store and the
// command ends with them, rather than wait out its timeout.
func TestACommandOutOnAnotherNodeEndsWithItsResultsOnceNATSIsBack(t *testing.T) {
	tc := newTestCluster(t)
	a, link := tc.nodeBehind("a", 100*time.Millisecond)
	b := tc.node("b")
	dev, _ := tc.linkedTo(b, a, "kiosk-1")
	out := make(chan api.CommandResponse, 1)
	go func() {
		out <- a.command("kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "10m"})
	}()
	cmd := dev.nextCommand()
	link.Cut()
	require.Eventually(t, func() bool { code, _ := a.health(); return code == http.StatusServiceUnavailable }, 15*time.Second, 10*time.Millisecond)
	dev.answer(cmd, protocol.ResultSuccess, "res-1")
	require.Eventually(t, func() bool {
		rec, err := b.srv.store.Commands().Get(context.Background(), cmd.ResponseID)
		return err == nil && rec.Status == store.CommandDone
	}, 10*time.Second, 10*time.Millisecond, "B did not record the results")

	link.Heal()
	select {
	case resp := <-out:
		assert.Equal(t, "success", resp.Status, "%+v", resp)
		assert.Equal(t, cmd.ResponseID, resp.ResponseID)
	case <-time.After(30 * time.Second):
		t.Fatal("the command waits on though its results were recorded and NATS is back")
	}
}

// Node B, which holds the device's link, is cut off from NATS, and NATS
// drops it: a command through A finds nothing listening for the device,
// and fails at its timeout naming NATS and B, not as if the device's
// link had dropped (it had not).
func TestACommandForANodeCutOffFromNATSFailsNamingNATSNotTheLink(t *testing.T) {
	tc := &testCluster{t: t, nats: natstest.StartWith(t, natstest.Options{PingInterval: 100 * time.Millisecond}),
		store: pgtest.Shared(t).NewDatabase(t)}
	a := tc.node("a")
	b, link := tc.nodeBehind("b", 100*time.Millisecond)
	dev, _ := tc.linkedTo(b, a, "kiosk-1")
	warm := a.echoInBackground("kiosk-1")
	dev.answer(dev.nextCommand(), protocol.ResultSuccess, "res-1")
	require.Equal(t, "success", (<-warm).Status)

	link.Cut()
	probe, err := nats.Connect(tc.nats.URL())
	require.NoError(t, err)
	defer probe.Close()
	require.Eventually(t, func() bool {
		_, err := probe.Request("aip.dev.kiosk-1", nil, time.Second)
		return errors.Is(err, nats.ErrNoResponders)
	}, 15*time.Second, 10*time.Millisecond, "NATS did not drop node b")
	resp := a.command("kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "2s"})
	assert.Equal(t, "failure", resp.Status)
	assert.Contains(t, resp.FirstError(), `command for device "kiosk-1" not`)
	assert.Contains(t, resp.FirstError(), `within 2s: NATS: node "b"`)
	assert.NotContains(t, resp.FirstError(), "link to device")
}

// The node holding a device's link sends on it only a command that is
// still on record as pending and within its deadline: a command NATS held
// through a partition until its sender had failed it, one its sender has
// ended, or one nobody recorded (forged on NATS) never runs. A caller
// told a command failed unsent can rely on it.
func TestTheHolderSendsNoCommandPastItsDeadlineEndedOrUnrecorded(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.node("a"), tc.node("b")
	dev, _ := tc.linkedTo(b, a, "kiosk-1")
	lease, err := a.srv.cluster.Lease(t.Context(), "kiosk-1")
	require.NoError(t, err)
	self, epoch := a.srv.cluster.Self()
	send := func(responseID string, deadline time.Time) cluster.Reply {
		t.Helper()
		r, err := a.srv.cluster.SendCommand(t.Context(), cluster.Command{DeviceID: "kiosk-1", LeaseEpoch: lease.Epoch, From: self, FromEpoch: epoch,
			Timeout: time.Minute, Deadline: deadline,
			Message: dispatch.CommandMessage("s", responseID, []protocol.Command{{ToolName: "echo", CallID: "c"}})})
		require.NoError(t, err)
		return r
	}

	r := send("forged", time.Now().Add(time.Minute))
	assert.Equal(t, cluster.Failed, r.Outcome)
	assert.Contains(t, r.Error, "the store holds no such command: not sent")

	resp := a.command("kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "200ms"})
	cmd := dev.nextCommand() // sent, and never answered: it fails at its deadline
	require.Equal(t, "failure", resp.Status)
	r = send(cmd.ResponseID, time.Now().Add(time.Minute))
	assert.Equal(t, cluster.Failed, r.Outcome)
	assert.Contains(t, r.Error, "it has ended (failed) on the node that took it: not sent")

	r = send(cmd.ResponseID, time.Now().Add(-time.Second))
	assert.Equal(t, cluster.Failed, r.Outcome)
	assert.Contains(t, r.Error, "its deadline passed")

	dev.ping() // nothing else came on the link
}

// A device whose node stopped heartbeating (a pause, say) is between
// links, for the other nodes, until its grace from that node's last
// heartbeat ends: UFO's dispatch through them takes work for it, which
// waits for it as any command does, rather than answer that it is not
// online.
func TestADeviceOfANodeFoundDeadIsAwaitedWithinItsGrace(t *testing.T) {
	tc := newTestCluster(t)
	grace := func(c *Config) { c.Sessions.DeviceGrace = time.Hour }
	a, b := tc.node("a", grace), tc.node("b", grace)
	tc.linkedTo(b, a, "kiosk-1")
	exec := tc.sql(t)
	// b's heartbeats fail from now on; a's sweep may still mark it gone.
	exec(`CREATE FUNCTION refuse_b() RETURNS trigger AS $$ BEGIN
		IF NEW.node_id = 'b' AND NEW.state <> 'gone' THEN RAISE EXCEPTION 'the test refuses node b'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`)
	exec(`CREATE TRIGGER refuse_b BEFORE UPDATE ON cluster_nodes FOR EACH ROW EXECUTE FUNCTION refuse_b()`)
	require.Eventually(t, func() bool { return !a.srv.cluster.IsLive("b") }, 10*time.Second, 10*time.Millisecond)

	code, msg := a.apiStatus("POST", "/api/dispatch", api.DispatchRequest{ClientID: "kiosk-1", Request: "steps: [{tool: echo}]"})
	assert.Equal(t, http.StatusOK, code, msg)
}

// A device linked to node B that prepares the tool of a command node A
// asked for has B pass its word on to A, whose wait it extends: the
// command succeeds after three times its timeout, and A's task events say
// what the device said. The word goes on a subject of its own, which a
// node that predates it does not hear: nothing on the subjects such a
// node listens on carries it.
func TestAPreparationOnAnotherNodeExtendsTheWaitOfTheNodeThatAsked(t *testing.T) {
	tc := newTestCluster(t)
	a, b := tc.node("a"), tc.node("b")
	dev, _ := tc.linkedTo(b, a, "kiosk-1")
	nc, err := nats.Connect(tc.nats.URL())
	require.NoError(t, err)
	defer nc.Close()
	heard := make(chan *nats.Msg, 16)
	for _, subject := range []string{"aip.node.a", "aip.recorded"} {
		_, err := nc.ChanSubscribe(subject, heard)
		require.NoError(t, err)
	}
	require.NoError(t, nc.Flush())

	const timeout = 300 * time.Millisecond
	done := a.commandAsync("kiosk-1", "echo", timeout)
	cmd := dev.nextCommand()
	dev.send(dev.preparing(cmd, "instrumenting", 1))
	time.Sleep(3 * timeout) // past the timeout, three times over
	dev.send(dev.preparing(cmd, protocol.PreparingReady, 3))
	dev.answer(cmd, protocol.ResultSuccess, "res-1")

	resp := <-done
	require.Equal(t, "success", resp.Status, resp.FirstError())
	requireOneDoneCommand(t, a, resp)
	var said []string
	for _, e := range a.taskEvents(resp.SessionID) {
		if e.Type == api.EventPreparing {
			said = append(said, api.PreparingText(e.Preparing))
		}
	}
	assert.Equal(t, []string{"preparing echo (instrumenting, step 1/3)", "echo prepared"}, said)
	require.NoError(t, nc.Flush())
	for len(heard) > 0 {
		m := <-heard
		assert.NotContains(t, string(m.Data), "preparing", "on %s, which an older node hears", m.Subject)
	}
}

// A device that answers on node B, whose store cannot record the results
// (B is cut off from it), fails the command waiting on node A at once,
// naming B and the store: not as a device that did not answer. B keeps
// the results, to record them late.
func TestResultsTheHoldersStoreCannotRecordFailTheCommandNamingTheStore(t *testing.T) {
	tc := newTestCluster(t)
	a := tc.node("a") // migrates the schema, on which b's role is granted rights
	roleB, asB := pgtest.Role(t, tc.store)
	b := tc.node("b", func(c *Config) { c.Store.URL = asB })
	dev, _ := tc.linkedTo(b, a, "kiosk-1")

	out := make(chan api.CommandResponse, 1)
	go func() {
		out <- a.command("kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "20s"})
	}()
	cmd := dev.nextCommand()
	pgtest.LockOut(t, tc.store, roleB)
	dev.send(*dev.results(cmd, protocol.ResultSuccess, "res-1"))

	resp := <-out
	assert.Equal(t, "failure", resp.Status)
	assert.Contains(t, resp.FirstError(), `device "kiosk-1" answered on node "b", but that node could not record its results: `)
	pgtest.LetIn(t, tc.store, roleB)
}
