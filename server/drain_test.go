package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Node a drains while it runs a plan whose first step its device has not
// answered. It refuses new tasks and links with 503 and says so on
// /api/health; once its grace is over it hands the plan off and closes
// the device's link with 1012, "draining". Node b adopts the plan; the
// device, registered with b, is sent the first step again, the same
// command, and the plan ends there. Nothing ran twice.
func TestADrainingNodeHandsItsTasksOffAndSendsItsDevicesElsewhere(t *testing.T) {
	p := planInFlight(t, "steps:\n  - tool: echo\n  - tool: echo\n")
	a, b, token, dev, d, first := p.a, p.b, p.token, p.dev, p.plan, p.first

	drained := make(chan int, 1)
	go func() {
		n, err := a.srv.Drain(context.Background(), 500*time.Millisecond)
		assert.NoError(t, err)
		drained <- n
	}()
	require.Eventually(t, func() bool { code, _ := a.health(); return code == http.StatusServiceUnavailable }, 5*time.Second, 5*time.Millisecond)
	_, h := a.health()
	assert.Contains(t, h.Cause, "this node is draining")
	code, msg := a.apiStatus("POST", "/api/dispatch", api.DispatchRequest{ClientID: "kiosk-1", Request: "steps:\n  - tool: echo\n"})
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, msg, "this node is draining, about to stop: send the request to another node of the cluster")
	_, err := a.dial(token)
	require.Error(t, err, "no new links")

	require.Equal(t, 1, <-drained, "the plan was handed off")
	_, err = dev.read()
	assert.Equal(t, websocket.StatusServiceRestart, websocket.CloseStatus(err), "closed with 1012: %v", err)

	runnerOf(t, d.SessionID, b)
	moved := b.mustDial(token)
	moved.register("kiosk-1", echoTool)
	again := moved.nextCommand()
	require.Equal(t, first.ResponseID, again.ResponseID, "the first step is sent again as it was")
	moved.answer(again, protocol.ResultSuccess, "r1")
	second := moved.nextCommand()
	moved.answer(second, protocol.ResultSuccess, "r2")
	task := b.waitTask(d.SessionID)
	assert.Equal(t, api.StateCompleted, task.State, task.Error)
	assert.Len(t, task.Commands, 2)
	moved.ackOf("r2")
	moved.ping() // nothing more
}

// Handing sessions off marks them handed off before it ends their
// commands: a plan whose step fails with "this node is draining" as the
// dispatcher freezes, before its session is cancelled, is still left
// unfinished for the node that adopts it, not ended failed here. Many
// plans at once make that order likely for some of them.
func TestHandedOffPlansAreLeftUnfinishedThoughTheirStepsEndFirst(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	const plans = 40
	ids := make([]string, plans)
	for i := range ids {
		ids[i] = dispatchPlan(t, ts, "kiosk-1", "steps:\n  - tool: echo\n").SessionID
	}
	for range plans {
		dev.nextCommand()
	}
	require.Equal(t, plans, ts.srv.sessions.HandOff())
	for _, id := range ids {
		row, err := ts.srv.store.Sessions().Get(context.Background(), id)
		require.NoError(t, err)
		assert.Equal(t, string(api.StateRunning), row.State, "task %s: %s", id, row.Error)
	}
}

// A draining node says so on /api/health only once it refuses new tasks:
// a client that reads it draining and sends a task anyway is refused.
// Here the session manager is held while the node starts to drain, so
// that it cannot yet refuse them; the health must not say draining then.
func TestANodeSaysItDrainsOnlyOnceItRefusesNewTasks(t *testing.T) {
	a := clusterNodes(t, "a")[0]
	release := a.srv.sessions.HoldForTest()
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, err := a.srv.Drain(context.Background(), 0)
		assert.NoError(t, err)
	}()
	never := time.After(200 * time.Millisecond)
	for wait := true; wait; {
		code, h := a.health()
		if !assert.Equal(t, http.StatusOK, code, "health says %q while the node still takes tasks", h.Cause) {
			break
		}
		select {
		case <-never:
			wait = false
		case <-time.After(5 * time.Millisecond):
		}
	}
	release()
	<-drained
	code, h := a.health()
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, h.Cause, "this node is draining")
}

// A node that has handed its tasks off sends nothing more on its links
// for the other nodes in the moment before it closes them: a command
// another node asks it to send waits for the device to register
// elsewhere, and goes to it there, once.
func TestAHandedOffNodeLeavesOtherNodesCommandsForTheDevicesNextLink(t *testing.T) {
	nodes := clusterNodes(t, "a", "b")
	a, b := nodes[0], nodes[1]
	token := a.enroll("kiosk-1")
	dev := a.mustDial(token)
	dev.register("kiosk-1", echoTool)
	require.Zero(t, a.srv.sessions.HandOff(), "nothing ran on a")

	d := dispatchPlan(t, b, "kiosk-1", "steps:\n  - tool: echo\n")
	require.Eventually(t, func() bool { return len(taskCommands(t, b, d.SessionID)) == 1 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // for a command a would wrongly send to arrive
	dev.ping()                         // nothing came before the ping's ack

	a.srv.reg.CloseLinks(websocket.StatusServiceRestart, drainCloseReason)
	_, err := dev.read()
	assert.Equal(t, websocket.StatusServiceRestart, websocket.CloseStatus(err), "closed with 1012: %v", err)
	moved := b.mustDial(token)
	moved.register("kiosk-1", echoTool)
	cmd := moved.nextCommand()
	assert.Equal(t, taskCommands(t, b, d.SessionID)[0].ResponseID, cmd.ResponseID)
	moved.answer(cmd, protocol.ResultSuccess, "r1")
	task := b.waitTask(d.SessionID)
	assert.Equal(t, api.StateCompleted, task.State, task.Error)
	moved.ackOf("r1")
	moved.ping()
}
