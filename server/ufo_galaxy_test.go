package server

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// galaxyFrame reads a frame of a UFO galaxy client's TASK path, as UFO's
// code builds it (testdata/protocol/ufo_wire.py, galaxy/).
func galaxyFrame(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.Root(), "testdata", "protocol", "galaxy", name+".ufo.json"))
	require.NoError(t, err)
	return string(b)
}

// ufoPeer is a raw WebSocket client that talks as UFO's clients do: no
// subprotocol, ?token= in the URL, JSON text frames sent byte for byte.
type ufoPeer struct {
	t   *testing.T
	ws  *websocket.Conn
	got []string // the frames the server sent, for pydantic to check
}

func (ts *testServer) dialUFO(token string) *ufoPeer {
	ts.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, ts.wsURL()+"?token="+url.QueryEscape(token), nil)
	require.NoError(ts.t, err)
	ts.t.Cleanup(func() { ws.CloseNow() })
	return &ufoPeer{t: ts.t, ws: ws}
}

func (p *ufoPeer) send(frame string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(p.t, p.ws.Write(ctx, websocket.MessageText, []byte(frame)))
}

// recv reads the server's next frame: a JSON text frame that decodes
// strictly. It returns the message and the frame's fields.
func (p *ufoPeer) recv() (protocol.ServerMessage, map[string]any) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	typ, b, err := p.ws.Read(ctx)
	require.NoError(p.t, err)
	require.Equal(p.t, websocket.MessageText, typ)
	p.got = append(p.got, string(b))
	var m protocol.ServerMessage
	require.NoError(p.t, protocol.JSON.Unmarshal(b, &m), "%s", b)
	var fields map[string]any
	require.NoError(p.t, json.Unmarshal(b, &fields))
	return m, fields
}

// recvLike reads the server's next frame and holds it to the frame UFO's
// server sends at that point: the same type and status, a session_id and
// an error where UFO's has them, a response_id and a timestamp, and no
// field UFO's ServerMessage lacks. Ours may fill in more of UFO's fields
// than UFO's server does.
func (p *ufoPeer) recvLike(ufoName string) protocol.ServerMessage {
	p.t.Helper()
	m, ours := p.recv()
	var theirs map[string]any
	require.NoError(p.t, json.Unmarshal([]byte(galaxyFrame(p.t, ufoName)), &theirs))
	for k := range ours {
		assert.Contains(p.t, theirs, k, "%s: field %q is not UFO's", ufoName, k)
	}
	for _, k := range []string{"type", "status"} {
		assert.Equal(p.t, theirs[k], ours[k], "%s: field %q, in %+v", ufoName, k, ours)
	}
	for _, k := range []string{"response_id", "timestamp"} {
		assert.NotEmpty(p.t, ours[k], "%s: field %q, in %+v", ufoName, k, ours)
	}
	for _, k := range []string{"session_id", "error"} {
		assert.Equal(p.t, theirs[k] != nil, ours[k] != nil, "%s: field %q, in %+v", ufoName, k, ours)
	}
	return m
}

// TestAGalaxyClientsTaskRunsAsOnUFOsServer replays a UFO galaxy client's
// frames, byte for byte, and holds the server's answers to UFO's server's:
// the registration ack, the task's ack and its TASK_END, under the task
// name sanitized as UFO's server sanitizes it; and a TASK that cannot
// start ends with a TASK_END for its session, which the galaxy client
// waits for, not with an ERROR, which it only logs.
func TestAGalaxyClientsTaskRunsAsOnUFOsServer(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	ts.device("kiosk-1", tool("stock", "echo", protocol.ToolAction)).serveOK()
	g := ts.dialUFO(ts.api.Token)

	g.send(galaxyFrame(t, "client_register"))
	g.recvLike("server_register_ack")

	g.send(galaxyFrame(t, "client_task"))
	ack := g.recvLike("server_task_ack")
	assert.Equal(t, "galaxy_task_1_t1", ack.TaskName, "the name is sanitized as UFO's server does")
	assert.Equal(t, "task_1@t1", ack.SessionID)
	end := g.recvLike("server_task_end")
	assert.Equal(t, protocol.StatusCompleted, end.Status, end.Error)
	assert.Equal(t, "task_1@t1", end.SessionID, "the galaxy client matches a TASK_END by its session_id")

	var res api.TaskResult
	require.NoError(t, ts.api.Do(ctx, "GET", "/api/task_result/galaxy_task_1_t1", nil, &res))
	assert.Equal(t, "done", res.Status)
	assert.Equal(t, "task_1@t1", res.SessionID)
	task, err := ts.api.Task(ctx, "task_1@t1")
	require.NoError(t, err)
	assert.Equal(t, "galaxy_task_1_t1", task.TaskName)
	assert.Equal(t, "galaxy/task_1/t1", task.OriginalTaskName, "the name as the client sent it is kept")
	assert.Contains(t, ts.logs.String(), `msg="task name sanitized" client_id=task_1@kiosk-1 task_name=galaxy_task_1_t1 sent=galaxy/task_1/t1`)

	// UFO's galaxy client sends prose, for UFO's planner; this server runs
	// plans, so that task cannot start.
	prose := strings.NewReplacer(`task_1@t1`, `task_1@t2`, `galaxy/task_1/t1`, `galaxy/task_1/t2`).
		Replace(galaxyFrame(t, "client_task"))
	prose = strings.Replace(prose, `"request":"{\"steps\": [{\"tool\": \"echo\", \"parameters\": {\"text\": \"hello\"}}]}"`,
		`"request":"Open the kiosk page"`, 1)
	require.Contains(t, prose, `"request":"Open the kiosk page"`)
	g.send(prose)
	failed := g.recvLike("server_task_end_failed")
	assert.Equal(t, "task_1@t2", failed.SessionID)
	assert.Contains(t, failed.Error, `task: field "request": not a plan`)

	g.send(`{"type":"heartbeat","status":"ok","client_type":"constellation","client_id":"task_1@kiosk-1"}`)
	hb, _ := g.recv()
	assert.Equal(t, protocol.ServerHeartbeat, hb.Type, "nothing else came for the refused task: %+v", hb)
	testenv.CheckWithPydantic(t, "server", g.got)
}

// POST /api/dispatch still refuses what the WebSocket sanitizes, as UFO's
// API does; task_result answers, for two names that sanitize to one, the
// latest task, as UFO's session_id_dict does.
func TestTaskNamesSentOverTheWebSocketAreSanitized(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	ts.device("kiosk-1", tool("stock", "echo", protocol.ToolAction)).serveOK()
	con := ts.constellation("orch-1", "kiosk-1")

	code, msg := ts.apiStatus("POST", "/api/dispatch", api.DispatchRequest{ClientID: "kiosk-1", Request: echoPlan, TaskName: "galaxy/t/a"})
	assert.Equal(t, 400, code)
	assert.Contains(t, msg, "Invalid task_name")

	for _, c := range []struct{ session, sent, name string }{
		{"s1", "galaxy/t/a b", "galaxy_t_a_b"},
		{"s2", "galaxy/t/a_b", "galaxy_t_a_b"},
		{"s3", "../../etc/passwd", "_.._etc_passwd"},
		{"s4", "...", ""},
		{"s5", "kiosk/überprüfung", "kiosk__berpr_fung"},
		{"s6", strings.Repeat("/", 200), strings.Repeat("_", 128)},
	} {
		ack := con.task(c.session, c.sent, echoPlan)
		require.Equal(t, protocol.ServerHeartbeat, ack.Type, "%s: %+v", c.sent, ack)
		end := con.recvType(protocol.ServerTaskEnd)
		require.Equal(t, protocol.StatusCompleted, end.Status, end.Error)
		task, err := ts.api.Task(ctx, c.session)
		require.NoError(t, err)
		if c.name == "" {
			assert.Regexp(t, `^[0-9a-f-]{36}$`, task.TaskName, "nothing left of %q: a fresh name, as UFO's server gives", c.sent)
		} else {
			assert.Equal(t, c.name, task.TaskName, c.sent)
		}
		assert.Equal(t, c.sent, task.OriginalTaskName)
	}
	var res api.TaskResult
	require.NoError(t, ts.api.Do(ctx, "GET", "/api/task_result/galaxy_t_a_b", nil, &res))
	assert.Equal(t, "s2", res.SessionID, "the latest of the tasks whose names sanitize to it")

	con.task("s7", "plain-name", echoPlan)
	con.recvType(protocol.ServerTaskEnd)
	task, err := ts.api.Task(ctx, "s7")
	require.NoError(t, err)
	assert.Equal(t, "plain-name", task.TaskName)
	assert.Empty(t, task.OriginalTaskName, "a valid name is kept as it is, with no original beside it")
}

// A TASK that cannot start ends in a TASK_END that names its session and
// says why; one for a session its requester still runs gets an ERROR, as
// that session's own TASK_END is still to come.
func TestATaskThatCannotStartEndsInATaskEnd(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	con := ts.constellation("orch-1", "kiosk-1")

	for _, c := range []struct{ session, plan, want string }{
		{"s-prose", "Restart the kiosk page", `task: field "request": not a plan`},
		{"s-empty", "", `task: field "request": empty task content`},
	} {
		end := con.task(c.session, "", c.plan)
		require.Equal(t, protocol.ServerTaskEnd, end.Type, "%+v", end)
		assert.Equal(t, protocol.StatusFailed, end.Status)
		assert.Equal(t, c.session, end.SessionID)
		assert.Contains(t, end.Error, c.want)
		assert.NotEmpty(t, end.ResponseID)
	}
	con.send(protocol.ClientMessage{Type: protocol.ClientTask, Status: protocol.StatusContinue, ClientType: protocol.ClientConstellation,
		ClientID: "orch-1", Request: "prose"})
	end := con.recvType(protocol.ServerTaskEnd)
	assert.NotEmpty(t, end.SessionID, "a TASK without a session_id gets one, as on UFO's server")

	require.Equal(t, protocol.ServerHeartbeat, con.task("s1", "", echoPlan).Type)
	cmd := dev.recvType(protocol.ServerCommand)
	m := con.task("s1", "", echoPlan)
	require.Equal(t, protocol.ServerError, m.Type, "%+v", m)
	assert.Contains(t, m.Error, `session_id "s1" is already running`)
	dev.answer(cmd, protocol.ResultSuccess, "")
	end = con.recvType(protocol.ServerTaskEnd)
	assert.Equal(t, protocol.StatusCompleted, end.Status, "the one TASK_END of s1")
	con.ping()
}

// The ack of a REGISTER carries a response_id, as UFO's server's always
// does: the REGISTER's request_id, or a fresh one.
func TestTheRegistrationAckCarriesAResponseID(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.mustDial(ts.enroll("kiosk-1"))
	dev.send(protocol.ClientMessage{Type: protocol.ClientRegister, ClientType: protocol.ClientDevice, ClientID: "kiosk-1"})
	ack := dev.recvType(protocol.ServerHeartbeat)
	assert.Regexp(t, `^[0-9a-f-]{36}$`, ack.ResponseID)

	again := ts.mustDial(ts.enroll("kiosk-2"))
	again.send(protocol.ClientMessage{Type: protocol.ClientRegister, ClientType: protocol.ClientDevice, ClientID: "kiosk-2", RequestID: "reg-2"})
	again.ackOf("reg-2")
}
