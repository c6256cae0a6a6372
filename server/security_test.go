package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These pin down, one test each, what UFO's security regression tests pin.

const echoPlan = `steps: [{tool: echo}]`

func TestADeviceClaimingToBeAConstellationIsRefused(t *testing.T) {
	ts := newTestServer(t)
	ts.device("kiosk-1")

	rc := ts.mustDial(ts.enroll("kiosk-2"))
	rc.send(protocol.ClientMessage{Type: protocol.ClientRegister, ClientType: protocol.ClientConstellation, ClientID: "kiosk-2", TargetID: "kiosk-1"})
	rc.requireError(`field "client_type": "constellation" is not allowed with a device token`)
	rc.requireClosed()

	// Registered as a device, it cannot switch to constellation later.
	dev := ts.device("kiosk-3")
	dev.send(protocol.ClientMessage{Type: protocol.ClientTask, ClientType: protocol.ClientConstellation, ClientID: "kiosk-3", Request: echoPlan})
	dev.requireError(`field "client_type": "constellation"`)

	// Nor can the operator token register a device.
	op := ts.mustDial(ts.api.Token)
	op.send(protocol.ClientMessage{Type: protocol.ClientRegister, ClientType: protocol.ClientDevice, ClientID: "kiosk-4"})
	op.requireError(`field "client_type": "device" needs the device's own token`)
	op.requireClosed()
}

func TestASpoofedClientIDIsRefused(t *testing.T) {
	ts := newTestServer(t)
	ts.device("kiosk-1")
	dev := ts.device("kiosk-2")
	dev.send(protocol.ClientMessage{Type: protocol.ClientHeartbeat, ClientID: "kiosk-1"})
	dev.requireError(`field "client_id": "kiosk-1" is not this connection's client "kiosk-2"`)
	dev.ping() // the connection stays, as itself

	con := ts.constellation("orch-1", "kiosk-1")
	con.send(protocol.ClientMessage{Type: protocol.ClientDeviceInfoRequest, ClientID: "orch-2"})
	con.requireError(`field "client_id": "orch-2"`)
}

func TestADeviceTargetingAPeerIsRefused(t *testing.T) {
	ts := newTestServer(t)
	ts.device("kiosk-1")

	rc := ts.mustDial(ts.enroll("kiosk-2"))
	rc.send(protocol.ClientMessage{Type: protocol.ClientRegister, ClientType: protocol.ClientDevice, ClientID: "kiosk-2", TargetID: "kiosk-1"})
	rc.requireError(`field "target_id": device "kiosk-2" may not target "kiosk-1"`)
	rc.requireClosed()

	dev := ts.device("kiosk-3")
	dev.send(protocol.ClientMessage{Type: protocol.ClientHeartbeat, ClientID: "kiosk-3", TargetID: "kiosk-1"})
	dev.requireError(`field "target_id": device "kiosk-3" may not target "kiosk-1"`)

	// A constellation is bound to the target it registered with.
	con := ts.constellation("orch-1", "kiosk-1")
	con.send(protocol.ClientMessage{Type: protocol.ClientDeviceInfoRequest, ClientID: "orch-1", TargetID: "kiosk-3"})
	con.requireError(`field "target_id": "kiosk-3" is not the target "kiosk-1"`)
	con.send(protocol.ClientMessage{Type: protocol.ClientTask, ClientID: "orch-1", TargetID: "kiosk-3", Request: echoPlan})
	con.requireError(`field "target_id": "kiosk-3"`)

	// And it must register with a target that is connected.
	bad := ts.mustDial(ts.api.Token)
	bad.send(protocol.ClientMessage{Type: protocol.ClientRegister, ClientType: protocol.ClientConstellation, ClientID: "orch-2", TargetID: "kiosk-9"})
	bad.requireError(`field "target_id": target device "kiosk-9" is not connected`)
	bad.requireClosed()
}

func TestTheMessagesOfAnUnregisteredConnectionAreRefused(t *testing.T) {
	ts := newTestServer(t)
	token := ts.enroll("kiosk-1")
	for _, typ := range []protocol.ClientMessageType{protocol.ClientHeartbeat, protocol.ClientCommandResults, protocol.ClientTask, protocol.ClientDeviceInfoRequest} {
		rc := ts.mustDial(token)
		rc.send(protocol.ClientMessage{Type: typ, ClientID: "kiosk-1", PrevResponseID: "r1", Request: echoPlan})
		rc.requireError(`not registered: the first message must be "register"`)
		rc.requireClosed()
	}
	assert.Empty(t, ts.srv.reg.IDs())
}

func TestASecondConnectionNeedsTheDevicesOwnToken(t *testing.T) {
	ts := newTestServer(t)
	token := ts.enroll("kiosk-1")
	orig := ts.mustDial(token)
	orig.register("kiosk-1")

	// Another device's token, claiming kiosk-1: refused, original kept.
	other := ts.mustDial(ts.enroll("kiosk-2"))
	other.send(protocol.ClientMessage{Type: protocol.ClientRegister, ClientType: protocol.ClientDevice, ClientID: "kiosk-1"})
	other.requireError(`field "client_id": "kiosk-1" does not match the device token's device "kiosk-2"`)
	other.requireClosed()
	// The operator token, claiming kiosk-1 as a constellation: refused too.
	op := ts.mustDial(ts.api.Token)
	op.send(protocol.ClientMessage{Type: protocol.ClientRegister, ClientType: protocol.ClientConstellation, ClientID: "kiosk-1", TargetID: "kiosk-1"})
	op.requireError(`field "client_id": "kiosk-1" is an enrolled device`)
	op.requireClosed()
	orig.ping()

	// With kiosk-1's own token, the new connection supersedes the old one.
	next := ts.mustDial(token)
	next.register("kiosk-1")
	orig.requireClosed()
	next.ping()
	assert.Equal(t, []string{"kiosk-1"}, ts.srv.reg.IDs())
}

func TestTaskEndsAcksAndDeviceInfoGoOnlyToTheRequester(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	asker := ts.constellation("orch-1", "kiosk-1")
	bystander := ts.constellation("orch-2", "kiosk-1")

	ack := asker.task("s1", "t1", echoPlan)
	require.Equal(t, protocol.ServerHeartbeat, ack.Type)
	assert.Equal(t, "s1", ack.SessionID)
	assert.Equal(t, "task-s1", ack.ResponseID)

	cmd := dev.recvType(protocol.ServerCommand)
	dev.answer(cmd, protocol.ResultSuccess, "res-1")
	dev.ackOf("res-1") // the results' ack goes to the device

	end := asker.recvType(protocol.ServerTaskEnd)
	assert.Equal(t, protocol.StatusCompleted, end.Status)
	assert.Equal(t, "s1", end.SessionID)
	assert.NotEmpty(t, end.ResponseID)
	assert.NotEmpty(t, end.Timestamp)

	asker.send(protocol.ClientMessage{Type: protocol.ClientDeviceInfoRequest, ClientID: "orch-1", RequestID: "info-1"})
	info := asker.recvType(protocol.ServerDeviceInfoResponse)
	assert.Equal(t, "info-1", info.ResponseID)
	assert.Equal(t, "kiosk-1", info.Result.(map[string]any)["device_id"])

	// Nothing of the above reached the others: their next message is the
	// ack of their own heartbeat.
	bystander.ping()
	dev.ping()
}

func TestASessionOwnedByAnotherClientIsRefusedNamingTheOwner(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1")
	c1 := ts.constellation("orch-1", "kiosk-1")
	c2 := ts.constellation("orch-2", "kiosk-1")

	require.Equal(t, protocol.ServerHeartbeat, c1.task("s1", "", echoPlan).Type)
	cmd := dev.recvType(protocol.ServerCommand)

	// While it runs...
	m := c2.task("s1", "", echoPlan)
	require.Equal(t, protocol.ServerTaskEnd, m.Type)
	assert.Equal(t, protocol.StatusFailed, m.Status)
	assert.Contains(t, m.Error, `session_id "s1" is owned by constellation:orch-1`)
	// ...its owner cannot start it twice...
	m = c1.task("s1", "", echoPlan)
	require.Equal(t, protocol.ServerError, m.Type)
	assert.Contains(t, m.Error, `session_id "s1" is already running`)

	dev.answer(cmd, protocol.ResultSuccess, "")
	c1.recvType(protocol.ServerTaskEnd)
	// ...and after it has ended, its results are not handed to another.
	m = c2.task("s1", "", echoPlan)
	require.Equal(t, protocol.ServerTaskEnd, m.Type)
	assert.Equal(t, protocol.StatusFailed, m.Status)
	assert.Contains(t, m.Error, `session_id "s1" is owned by constellation:orch-1`)
	assert.Nil(t, m.Result, "nothing of orch-1's task")
}

func TestCommandResultsCreateNothingAndComeOnlyFromTheirDevice(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	a := ts.device("kiosk-a")
	b := ts.device("kiosk-b")

	// Results for a command nobody sent: refused, and nothing is created.
	b.send(protocol.ClientMessage{Type: protocol.ClientCommandResults, ClientID: "kiosk-b", SessionID: "forged", PrevResponseID: "r-forged", RequestID: "q1",
		ActionResults: []protocol.Result{{Status: protocol.ResultSuccess}}})
	m := b.requireError(`command_results for response_id "r-forged": no such command`)
	assert.Equal(t, "q1", m.ResponseID)
	tasks, err := ts.api.Tasks(ctx, "", 0)
	require.NoError(t, err)
	assert.Empty(t, tasks)
	_, err = ts.api.Task(ctx, "forged")
	require.Error(t, err)

	done := make(chan api.CommandResponse, 1)
	go func() {
		resp, _ := ts.api.Command(ctx, "kiosk-a", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
		done <- resp
	}()
	cmd := a.recvType(protocol.ServerCommand)

	// Another device answering it is refused...
	b.send(*b.results(cmd, protocol.ResultFailure, "q2"))
	b.requireError(`that command was not sent to "kiosk-b"`)
	// ...the device it went to is heard...
	a.answer(cmd, protocol.ResultSuccess, "q3")
	a.ackOf("q3")
	resp := <-done
	require.True(t, resp.Succeeded(), "%+v", resp)
	// ...once: a repeat is acknowledged and ignored.
	a.send(*a.results(cmd, protocol.ResultFailure, "q4"))
	a.ackOf("q4")

	task, err := ts.api.Task(ctx, resp.SessionID)
	require.NoError(t, err)
	require.Len(t, task.Commands, 1)
	assert.Equal(t, protocol.ResultSuccess, task.Commands[0].Results[0].Status)
	var audit []api.AuditEntry
	require.NoError(t, ts.api.Do(ctx, "GET", "/api/audit?session="+resp.SessionID, nil, &audit))
	require.Len(t, audit, 1, "recorded exactly once")
	assert.Equal(t, protocol.ResultSuccess, audit[0].Outcome)
}

func TestTaskNamesWithPathTraversalAre400(t *testing.T) {
	ts := newTestServer(t)
	ts.device("kiosk-1")
	for _, name := range []string{"../etc/passwd", "..", ".hidden", `a\b`, "a/b"} {
		code, msg := ts.apiStatus("POST", "/api/dispatch", api.DispatchRequest{ClientID: "kiosk-1", Request: echoPlan, TaskName: name})
		assert.Equal(t, http.StatusBadRequest, code, name)
		assert.Contains(t, msg, "Invalid task_name", name)
	}
	for _, path := range []string{"/api/task_result/..%2F..%2Fetc%2Fpasswd", "/api/task_result/.env", "/api/task_result/a%5Cb"} {
		code, _ := ts.apiStatus("GET", path, nil)
		assert.Equal(t, http.StatusBadRequest, code, path)
	}
	code, _ := ts.apiStatus("POST", "/api/dispatch", api.DispatchRequest{ClientID: "kiosk-1", Plan: []byte(`{"task_name": "../x", "steps": [{"tool": "echo"}]}`)})
	assert.Equal(t, http.StatusBadRequest, code, "a plan's own task_name is checked too")
	// Over the WebSocket they are sanitized instead, as UFO's server does:
	// TestTaskNamesSentOverTheWebSocketAreSanitized.
}

func TestTokensAreStoredHashedAndNeverLogged(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	devToken := ts.enroll("kiosk-1")

	// UFO's ?token= on the WebSocket, the bearer and X-API-Key on the API,
	// a constellation with the operator token, and wrong tokens of each.
	_, err := ts.dial("")
	require.Error(t, err)
	q, err := ts.dialQuery(devToken)
	require.NoError(t, err)
	q.register("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	q.serveOK()
	con := ts.constellation("orch-1", "kiosk-1")
	con.task("s1", "", echoPlan)
	con.recvType(protocol.ServerTaskEnd)
	for _, h := range []http.Header{{"X-API-Key": {ts.api.Token}}, {"X-API-Key": {ts.api.Token + "x"}}, {"Authorization": {"Bearer " + devToken}}} {
		req, _ := http.NewRequest("GET", ts.http.URL+"/api/devices", nil)
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
	}
	_, err = ts.dial(ts.api.Token + "x")
	require.Error(t, err)
	_, err = ts.dialQuery(devToken + "x")
	require.Error(t, err, "a wrong token in the URL is refused, and the refusal logged")
	_, err = ts.api.Command(ctx, "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
	require.NoError(t, err)

	con.conn.CloseNow()
	q.conn.CloseNow()
	ts.srv.Close()
	logs := ts.logs.String()
	require.Contains(t, logs, "constellation registered", "logs were captured")
	stored := ts.storedBytes()
	for name, token := range map[string]string{"operator": ts.api.Token, "device": devToken} {
		assert.NotContains(t, logs, token, "the %s token is in the logs", name)
		assert.NotContains(t, stored, token, "the %s token is in the store", name)
	}
	assert.Contains(t, stored, identity.HashToken(devToken), "the device token's hash is what is kept")
	assert.True(t, strings.HasPrefix(devToken, identity.DeviceTokenPrefix))
}

// dialQuery connects as UFO's clients do, with the token in the URL.
func (ts *testServer) dialQuery(token string) (*rawClient, error) {
	ctx := context.Background()
	conn, _, err := protocol.Dial(ctx, ts.wsURL()+"?token="+token, protocol.DialOptions{Encoding: protocol.CBOR})
	if err != nil {
		return nil, err
	}
	ts.t.Cleanup(func() { conn.CloseNow() })
	return &rawClient{t: ts.t, conn: conn}, nil
}
