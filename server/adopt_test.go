package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// clusterNodes starts nodes of one new cluster, with the given ids.
func clusterNodes(t *testing.T, ids ...string) []*testServer {
	t.Helper()
	tc := newTestCluster(t)
	nodes := make([]*testServer, len(ids))
	for i, id := range ids {
		nodes[i] = tc.node(id)
	}
	return nodes
}

// runnerOf is the node of nodes that runs task id, once one does.
func runnerOf(t *testing.T, id string, nodes ...*testServer) *testServer {
	t.Helper()
	var found *testServer
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if n.srv.tasks.Running(id) {
				found = n
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "no node adopted task %s", id)
	return found
}

// echoTool is the tool the devices of the cluster tests offer.
var echoTool = tool("stock", "echo", protocol.ToolAction)

// inFlight is a plan running on node a of nodes a and b, whose first
// command its device, kiosk-1 (echoTool), linked to a, has.
type inFlight struct {
	a, b  *testServer
	token string // kiosk-1's
	dev   *rawClient
	plan  api.DispatchResponse
	first protocol.ServerMessage
}

// planInFlight starts nodes a and b of a new cluster and runs planDoc on
// kiosk-1 through a, until the device has its first command.
func planInFlight(t *testing.T, planDoc string) inFlight {
	t.Helper()
	nodes := clusterNodes(t, "a", "b")
	p := inFlight{a: nodes[0], b: nodes[1], token: nodes[0].enroll("kiosk-1")}
	p.dev = p.a.mustDial(p.token)
	p.dev.register("kiosk-1", echoTool)
	p.plan = dispatchPlan(t, p.a, "kiosk-1", planDoc)
	p.first = p.dev.nextCommand()
	return p
}

// taskCommands are the commands the store holds for a task.
func taskCommands(t *testing.T, ts *testServer, id string) []api.CommandRecord {
	t.Helper()
	task, err := ts.api.Task(context.Background(), id)
	require.NoError(t, err)
	return task.Commands
}

// Node a accepts a plan and sends its first step; then a is cut off from
// everything (its device link drops, its lease is gone) but runs on, as a
// partitioned node does. Node b or c adopts a's sessions, sends the
// first step again with the same response_id and
// call_ids when the device registers with it, and runs the plan to its
// end. Node a, once its command times out, finds itself fenced off: it
// records no second step, and not its own end.
func TestAPlanOfADeadNodeIsAdoptedOnceAndRunsOnFromItsLastStep(t *testing.T) {
	nodes := clusterNodes(t, "a", "b", "c")
	a, b, c := nodes[0], nodes[1], nodes[2]
	echo := tool("stock", "echo", protocol.ToolAction)
	token := a.enroll("kiosk-1")
	dev := a.mustDial(token)
	dev.register("kiosk-1", echo)
	d := dispatchPlan(t, a, "kiosk-1", `
steps:
  - tool: echo
    timeout: 2s
  - tool: echo
`)
	first := dev.nextCommand()
	// Streams on the other nodes, from the store, while a runs the plan.
	watched := []<-chan []api.TaskEvent{b.events(d.SessionID), c.events(d.SessionID)}
	a.http.CloseClientConnections() // a is cut off: the link drops, a runs on

	a.srv.leaveCluster() // and its lease is gone: the others adopt its sessions
	adopter := runnerOf(t, d.SessionID, b, c)
	events := adopter.events(d.SessionID)

	moved := adopter.mustDial(token)
	moved.register("kiosk-1", echo)
	again := moved.nextCommand()
	assert.Equal(t, first.ResponseID, again.ResponseID, "sent again as it was")
	assert.Equal(t, protocol.CallIDs(first.Actions), protocol.CallIDs(again.Actions))
	moved.answer(again, protocol.ResultSuccess, "res-1")
	second := moved.nextCommand()
	assert.NotEqual(t, first.ResponseID, second.ResponseID)
	moved.answer(second, protocol.ResultSuccess, "res-2")

	task := adopter.waitTask(d.SessionID)
	assert.Equal(t, api.StateCompleted, task.State, task.Error)
	evs := <-events
	require.Len(t, evs, 5, "the first step's start and end, as a emitted them, the second's, the end: %+v", evs)
	assert.Equal(t, first.ResponseID, evs[0].ResponseID)
	for _, w := range watched {
		assert.Equal(t, eventKinds(evs), eventKinds(<-w), "a stream on any node sees every event, across the adoption")
	}

	// a's command times out; a goes no further.
	require.Eventually(t, func() bool { return !a.srv.tasks.Running(d.SessionID) }, 10*time.Second, 10*time.Millisecond)
	assert.Contains(t, a.logs.String(), "session left to another node to run on")
	for _, n := range nodes {
		assert.Equal(t, eventKinds(evs[3:]), eventKinds(n.eventsAfter(d.SessionID, 3)), "Last-Event-ID means the same on every node")
	}
	assert.Len(t, taskCommands(t, adopter, d.SessionID), 2, "a recorded no command after it was fenced off")
	task = adopter.waitTask(d.SessionID)
	assert.Equal(t, api.StateCompleted, task.State, "a's end is not recorded")
	moved.ackOf("res-2")
	moved.ping() // and nothing more was sent to the device
}

// A client's command goes to node a, which sends it and is then cut off
// before it answers. The client repeats it, with its Idempotency-Key,
// through node b, which has adopted a's sessions: the repeat waits for the
// command, which b sends again and the device answers once, and gets its
// outcome. One task, one command.
func TestARepeatThroughAnotherNodeGetsTheOutcomeOfTheAdoptedCommand(t *testing.T) {
	nodes := clusterNodes(t, "a", "b")
	a, b := nodes[0], nodes[1]
	token := a.enroll("kiosk-1")
	dev := a.mustDial(token)
	dev.register("kiosk-1")
	const path = "/api/devices/kiosk-1/commands"
	a.postUnheard(path, "key-1", echoCommand)
	first := dev.nextCommand()
	a.http.CloseClientConnections()

	a.srv.leaveCluster()
	runnerOf(t, first.SessionID, b)
	repeat := b.postKeyedAsync(path, "key-1", echoCommand)
	b.waitLog("a repeated request waits for the task the first request under its key started")
	moved := b.mustDial(token)
	moved.register("kiosk-1")
	again := moved.nextCommand()
	require.Equal(t, first.ResponseID, again.ResponseID)
	moved.answer(again, protocol.ResultSuccess, "r1")

	ans := <-repeat
	require.Equal(t, http.StatusOK, ans.code, string(ans.body))
	assert.True(t, ans.replayed)
	var resp api.CommandResponse
	require.NoError(t, json.Unmarshal(ans.body, &resp))
	assert.True(t, resp.Succeeded(), string(ans.body))
	assert.Equal(t, first.ResponseID, resp.ResponseID)
	assert.Equal(t, 1, b.taskCount(), "one task")
	assert.Len(t, taskCommands(t, b, resp.SessionID), 1, "one command")
}

// postUnheard posts body to path under Idempotency-Key key, for a client
// that a cut below keeps from hearing the answer.
func (ts *testServer) postUnheard(path, key, body string) {
	go func() {
		req, _ := http.NewRequest("POST", ts.http.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ts.api.Token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.IdempotencyKeyHeader, key)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
}

// Node a sends a command to its device and is cut off before the device
// answers; node b adopts the task and resumes the command, and the device
// does not come back within the command's timeout. The device has the
// command (a sent it), so the failure says that it may still run, never
// that it was not sent: the client repeating its request through b
// cannot take it as a command that will not run.
func TestAResumedCommandThatTimesOutSaysItMayStillRun(t *testing.T) {
	tc := newTestCluster(t)
	a := tc.node("a")
	dev := a.mustDial(a.enroll("kiosk-1"))
	dev.register("kiosk-1")
	const path = "/api/devices/kiosk-1/commands"
	const body = `{"actions": [{"tool_name": "echo"}], "timeout": "2s"}`
	a.postUnheard(path, "key-1", body)
	first := dev.nextCommand()
	a.http.CloseClientConnections()

	a.srv.leaveCluster()
	// b starts after a has left: it never heard where the device was, and
	// the device's lease is a dead node's, so b sends the command nowhere.
	b := tc.node("b")
	runnerOf(t, first.SessionID, b)
	ans := b.postKeyed(path, "key-1", body)
	require.Equal(t, http.StatusOK, ans.code, string(ans.body))
	var resp api.CommandResponse
	require.NoError(t, json.Unmarshal(ans.body, &resp))
	assert.Equal(t, first.ResponseID, resp.ResponseID)
	assert.Contains(t, resp.FirstError(), dispatch.MayStillRun)
	assert.NotContains(t, resp.FirstError(), "not sent")
}

// eventKinds is what identifies events: their type, step, attempt,
// command, status and state.
func eventKinds(evs []api.TaskEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		step := -1
		if e.Step != nil {
			step = *e.Step
		}
		out[i] = fmt.Sprintf("%s step=%d attempt=%d tool=%s response_id=%s status=%s state=%s", e.Type, step, e.Attempt, e.Tool,
			e.ResponseID, e.Status, e.State)
	}
	return out
}

// eventsAfter reads a task's event stream from Last-Event-ID n to its end.
func (ts *testServer) eventsAfter(id string, n int) []api.TaskEvent {
	ts.t.Helper()
	req, _ := http.NewRequest("GET", ts.http.URL+"/api/tasks/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+ts.api.Token)
	req.Header.Set("Last-Event-ID", strconv.Itoa(n))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(ts.t, err)
	defer resp.Body.Close()
	require.Equal(ts.t, http.StatusOK, resp.StatusCode)
	var all []api.TaskEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var e api.TaskEvent
			require.NoError(ts.t, json.Unmarshal([]byte(data), &e))
			all = append(all, e)
		}
	}
	return all
}

// A fleet on node a has started its first device's task, one at a time,
// when a is cut off. Node b adopts the fleet with that task: it sends the
// first device its command again, the same one, then starts the second
// device's task itself, and the fleet completes there. Each device ran
// its step once.
func TestAFleetOfADeadNodeIsAdoptedWithItsDevicesTasks(t *testing.T) {
	nodes := clusterNodes(t, "a", "b")
	a, b := nodes[0], nodes[1]
	echo := tool("stock", "echo", protocol.ToolAction)
	tokens := map[string]string{}
	devs := map[string]*rawClient{}
	for _, id := range []string{"kiosk-1", "kiosk-2"} {
		resp, err := a.api.Enroll(context.Background(), api.EnrollRequest{ID: id, Labels: map[string]string{"site": "x"}})
		require.NoError(t, err)
		tokens[id], devs[id] = resp.Token, a.mustDial(resp.Token)
		devs[id].register(id, echo)
	}
	f := a.fleet(api.FleetRequest{Labels: map[string]string{"site": "x"}, Concurrency: 1, Plan: json.RawMessage(`"steps:\n  - tool: echo\n"`)})
	require.Equal(t, []string{"kiosk-1", "kiosk-2"}, f.Devices)
	first := devs["kiosk-1"].nextCommand()
	a.http.CloseClientConnections()
	a.srv.leaveCluster()

	runnerOf(t, f.SessionID, b)
	moved := map[string]*rawClient{}
	for id, tok := range tokens {
		moved[id] = b.mustDial(tok)
		moved[id].register(id, echo)
	}
	again := moved["kiosk-1"].nextCommand()
	require.Equal(t, first.ResponseID, again.ResponseID)
	moved["kiosk-1"].answer(again, protocol.ResultSuccess, "r1")
	moved["kiosk-2"].answer(moved["kiosk-2"].nextCommand(), protocol.ResultSuccess, "r2")

	task := b.waitTask(f.SessionID)
	require.Equal(t, api.StateCompleted, task.State, task.Error)
	res := fleetResult(t, task)
	assert.Equal(t, map[string]api.TaskState{"kiosk-1": api.StateCompleted, "kiosk-2": api.StateCompleted}, deviceStates(res))
	for _, d := range res.Devices {
		assert.Len(t, taskCommands(t, b, d.SessionID), 1, "%s ran its step once", d.DeviceID)
	}
}

// Two first requests with one Idempotency-Key, through two nodes at once:
// both find the key unrecorded. Node b's command waits behind its
// store's writer while node a records its own and sends it; b's record
// then fails on the key, having recorded nothing, and b answers as for a
// repeat: a's command's outcome. The device ran it once.
func TestTwoFirstRequestsWithOneKeyThroughTwoNodesRunOnce(t *testing.T) {
	nodes := clusterNodes(t, "a", "b")
	a, b := nodes[0], nodes[1]
	dev := a.device("kiosk-1")
	const path = "/api/devices/kiosk-1/commands"
	release := b.holdWriter()
	viaB := b.postKeyedAsync(path, "key-1", echoCommand)
	b.waitStepStarted()
	viaA := a.postKeyedAsync(path, "key-1", echoCommand)
	cmd := dev.nextCommand()
	release()
	b.waitLog("a repeated request waits for the task the first request under its key started")
	dev.answer(cmd, protocol.ResultSuccess, "r1")

	ansA, ansB := <-viaA, <-viaB
	require.Equal(t, http.StatusOK, ansA.code, string(ansA.body))
	require.Equal(t, http.StatusOK, ansB.code, string(ansB.body))
	assert.False(t, ansA.replayed)
	assert.True(t, ansB.replayed, "b answers as for a repeat")
	assert.JSONEq(t, string(ansA.body), string(ansB.body))
	assert.Equal(t, 1, a.taskCount(), "one task: b recorded nothing")
	dev.ackOf("r1")
	dev.ping() // nothing more was sent
}

// Sessions a node has adopted are its own to run on: a resume that
// starts after the adoption's deadline has passed (a slow store) still
// runs them, where it used to fail to read them and then to fail them,
// leaving them adopted, never run, until this node died.
func TestAdoptedSessionsRunOnPastTheAdoptionsDeadline(t *testing.T) {
	p := planInFlight(t, "steps:\n  - tool: echo\n")
	a, b, d := p.a, p.b, p.plan
	require.Equal(t, 1, a.srv.sessions.HandOff())

	var ids []string
	require.NoError(t, b.srv.store.Write(context.Background(), func(tx *store.Tx) (err error) {
		ids, err = tx.Sessions().Adopt(a.srv.owner(), b.srv.owner())
		return err
	}))
	require.Equal(t, []string{d.SessionID}, ids)
	past, cancel := context.WithCancel(context.Background())
	cancel()
	b.srv.sessions.ResumeAll(past, ids)
	runnerOf(t, d.SessionID, b)

	moved := b.mustDial(p.token)
	moved.register("kiosk-1", echoTool)
	again := moved.nextCommand()
	require.Equal(t, p.first.ResponseID, again.ResponseID)
	moved.answer(again, protocol.ResultSuccess, "r1")
	assert.Equal(t, api.StateCompleted, b.waitTask(d.SessionID).State)
}

// Node a loses its lease while a command waits on it for its device,
// which is between links, rejoins at a new epoch, and adopts its own old
// epoch's sessions: the command is resumed on the node where its first
// run still waits. It must wait there once. The resumed copy takes the
// first one's place, and the first run's caller hears at once that how
// it ends is not known here, never that it failed: the run that goes on
// may yet send it. Then a drains: the task goes to b, the device gets
// the command there once, and the task ends with its results. (The
// breach of issue 36's rolling restart: the first copy, no longer
// waiting anywhere but on its timer, failed "not sent within 10s" on
// the drained node, after the resumed copy had run.)
func TestACommandANodeResumesWhileItsFirstRunWaitsThereWaitsOnceAndIsNotAnsweredFailed(t *testing.T) {
	tc := newTestCluster(t)
	a := tc.node("a")
	dev, token := tc.linkedTo(a, a, "kiosk-1")
	dev.conn.CloseNow()
	require.Eventually(t, func() bool { return a.srv.reg.Reach("kiosk-1").GraceLeft > 0 }, 5*time.Second, 5*time.Millisecond)

	type answer struct {
		resp api.CommandResponse
		err  error
	}
	first := make(chan answer, 1)
	go func() {
		resp, err := a.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "10s"})
		first <- answer{resp, err}
	}()
	const waits = `msg="device is offline; the command waits for it to register again"`
	a.waitLog(waits)

	tc.markAllDead()
	// It rejoins at epoch 2 and adopts its sessions of epoch 1: the
	// command is resumed, and waits for the device again.
	require.Eventually(t, func() bool { return strings.Count(a.logs.String(), waits) == 2 }, 10*time.Second, 10*time.Millisecond,
		"the command was not resumed on a")

	b := tc.node("b")
	_, err := a.srv.Drain(context.Background(), 0)
	require.NoError(t, err)
	onB := b.mustDial(token)
	onB.register("kiosk-1", echoTool)
	cmd := onB.nextCommand()
	onB.answer(cmd, protocol.ResultSuccess, "res-1")
	onB.ackOf("res-1")
	onB.ping() // and it was sent once

	ans := <-first
	var se *api.StatusError
	require.ErrorAs(t, ans.err, &se, "the first caller is told no failure: %+v", ans.resp)
	assert.Equal(t, http.StatusServiceUnavailable, se.Code)
	assert.Contains(t, se.Message, "how it ends is not known here")
	task := b.waitTask(cmd.SessionID)
	assert.Equal(t, api.StateCompleted, task.State, task.Error)
	require.Len(t, task.Commands, 1)
	assert.Equal(t, cmd.ResponseID, task.Commands[0].ResponseID)
	assert.Equal(t, "done", task.Commands[0].Status)
}
