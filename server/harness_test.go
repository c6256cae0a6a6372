package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/httpapi/httpapitest"
	"github.com/edgeaip/edgeaip/server/internal/servertest"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/stretchr/testify/require"
)

// testServer is a Server on loopback, its operator client, and its logs.
type testServer struct {
	t    *testing.T
	srv  *Server
	http *httptest.Server
	api  *api.Client
	dir  string
	logs *testenv.LogBuffer
}

func newTestServer(t *testing.T, configure ...func(*Config)) *testServer {
	t.Helper()
	logs := &testenv.LogBuffer{}
	var out io.Writer = logs
	if os.Getenv("SERVER_LOG") != "" {
		out = io.MultiWriter(logs, os.Stderr)
	}
	cfg := Config{DataDir: t.TempDir(), Store: StoreConfig{URL: testStoreURL(t)},
		Logger: slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, c := range configure {
		c(&cfg)
	}
	s, err := New(context.Background(), cfg)
	require.NoError(t, err)
	hs := httptest.NewServer(httpapitest.Conformance(t, s.Handler()))
	t.Cleanup(func() {
		s.Shutdown()
		hs.Close()
		s.Close()
	})
	token, err := os.ReadFile(filepath.Join(cfg.DataDir, AdminTokenFile))
	require.NoError(t, err)
	return &testServer{t: t, srv: s, http: hs, dir: cfg.DataDir, logs: logs,
		api: &api.Client{BaseURL: hs.URL, Token: strings.TrimSpace(string(token))}}
}

// testStoreURL is the store of a test server: none (SQLite in its data
// dir) or, with EDGEAIP_TEST_STORE=postgres, a fresh PostgreSQL database.
func testStoreURL(t *testing.T) string {
	if pgtest.StoreOnPostgres(t) {
		return pgtest.Shared(t).NewDatabase(t)
	}
	return ""
}

// storedBytes is what the store holds, as bytes: SQLite's database and
// its WAL, or PostgreSQL's data as pg_dump writes it. Close the server
// first, for SQLite's files to hold everything written.
func (ts *testServer) storedBytes() string {
	ts.t.Helper()
	if url := ts.srv.cfg.Store.URL; url != "" {
		return pgtest.Shared(ts.t).Dump(ts.t, url)
	}
	var all []byte
	for _, f := range []string{DatabaseFile, DatabaseFile + "-wal"} {
		b, _ := os.ReadFile(filepath.Join(ts.dir, f))
		all = append(all, b...)
	}
	return string(all)
}

func (ts *testServer) wsURL() string { return "ws" + strings.TrimPrefix(ts.http.URL, "http") + "/ws" }

// enroll enrolls id and returns its token.
func (ts *testServer) enroll(id string) string {
	ts.t.Helper()
	resp, err := ts.api.Enroll(context.Background(), api.EnrollRequest{ID: id})
	require.NoError(ts.t, err)
	return resp.Token
}

// apiStatus calls the API and returns the HTTP status and error message.
func (ts *testServer) apiStatus(method, path string, in any) (int, string) {
	ts.t.Helper()
	err := ts.api.Do(context.Background(), method, path, in, nil)
	if err == nil {
		return http.StatusOK, ""
	}
	var se *api.StatusError
	require.ErrorAs(ts.t, err, &se)
	return se.Code, se.Message
}

// waitTask polls a task until its state is final.
func (ts *testServer) waitTask(id string) api.Task {
	ts.t.Helper()
	var task api.Task
	require.Eventually(ts.t, func() bool {
		var err error
		task, err = ts.api.Task(context.Background(), id)
		return err == nil && task.State.Ended()
	}, 20*time.Second, 10*time.Millisecond, "task %s never ended", id)
	return task
}

// testAdmin is an unscoped admin, for what tests call below the API.
var testAdmin = servertest.Admin

// operatorCommand is the session of a single command for deviceID, asked
// through the API by testAdmin.
func operatorCommand(deviceID string) tasks.SessionSpec {
	return tasks.SessionSpec{DeviceID: deviceID, Requester: testAdmin.Requester(api.RequesterOperator, "")}
}

// rawClient speaks AIP by hand, as a device or a constellation.
type rawClient struct {
	t    *testing.T
	conn *protocol.Conn
	id   string
	// acks are the acks of results read while waiting for something
	// else, by the request_id they answer, until ackOf claims them.
	acks map[string]protocol.ServerMessage
}

// dial connects with token (none if empty) and the CBOR wire.
func (ts *testServer) dial(token string) (*rawClient, error) {
	return ts.dialWire(token, protocol.CBOR)
}

// dialWire connects with token (none if empty) and the encoding enc.
func (ts *testServer) dialWire(token string, enc protocol.Encoding) (*rawClient, error) {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _, err := protocol.Dial(ctx, ts.wsURL(), protocol.DialOptions{Header: h, Encoding: enc})
	if err != nil {
		return nil, err
	}
	rc := &rawClient{t: ts.t, conn: conn}
	ts.t.Cleanup(func() { conn.CloseNow() })
	return rc, nil
}

func (ts *testServer) mustDial(token string) *rawClient {
	ts.t.Helper()
	rc, err := ts.dial(token)
	require.NoError(ts.t, err)
	return rc
}

func (rc *rawClient) send(m protocol.ClientMessage) {
	rc.t.Helper()
	if m.Status == "" {
		m.Status = protocol.StatusOK
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(rc.t, rc.conn.Send(ctx, &m))
}

// read returns the next message, or an error if the link ends or nothing
// comes within 10 s.
func (rc *rawClient) read() (protocol.ServerMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var m protocol.ServerMessage
	err := rc.conn.Read(ctx, &m)
	return m, err
}

func (rc *rawClient) recv() protocol.ServerMessage {
	rc.t.Helper()
	m, err := rc.read()
	require.NoError(rc.t, err)
	return m
}

// recvType reads the next message and requires it to be of type typ.
func (rc *rawClient) recvType(typ protocol.ServerMessageType) protocol.ServerMessage {
	rc.t.Helper()
	m := rc.recv()
	require.Equal(rc.t, typ, m.Type, "message: %+v", m)
	return m
}

// nextCommand returns the next COMMAND, passing over (and keeping, for
// ackOf) the acks of results the device sent before.
func (rc *rawClient) nextCommand() protocol.ServerMessage {
	rc.t.Helper()
	for {
		m := rc.recv()
		if m.Type == protocol.ServerCommand {
			return m
		}
		rc.keepAck(m)
	}
}

// keepAck requires m to be an ack and keeps it for ackOf.
func (rc *rawClient) keepAck(m protocol.ServerMessage) {
	rc.t.Helper()
	require.Equal(rc.t, protocol.ServerHeartbeat, m.Type, "message: %+v", m)
	if rc.acks == nil {
		rc.acks = map[string]protocol.ServerMessage{}
	}
	rc.acks[m.ResponseID] = m
}

// ackOf returns the ack of the results the device sent as requestID,
// passing over (and keeping) the acks of others. Acks need not come in
// the order of the results: the server acknowledges results once
// recorded, after it has answered whoever waited for them, and it records
// a device's results on a goroutine each.
func (rc *rawClient) ackOf(requestID string) protocol.ServerMessage {
	rc.t.Helper()
	for {
		if m, ok := rc.acks[requestID]; ok {
			delete(rc.acks, requestID)
			return m
		}
		rc.keepAck(rc.recv())
	}
}

// requireError reads the next message and requires an ERROR mentioning want.
func (rc *rawClient) requireError(want string) protocol.ServerMessage {
	rc.t.Helper()
	m := rc.recvType(protocol.ServerError)
	require.Contains(rc.t, m.Error, want)
	return m
}

// requireClosed requires the server to end the connection.
func (rc *rawClient) requireClosed() {
	rc.t.Helper()
	for {
		m, err := rc.read()
		if err != nil {
			require.NotContains(rc.t, err.Error(), "deadline exceeded", "the connection stayed open")
			return
		}
		rc.t.Logf("before close: %+v", m)
	}
}

// ping sends a heartbeat and requires its ack, with nothing before it
// but acks of earlier results: nothing else was waiting for this client.
func (rc *rawClient) ping() {
	rc.t.Helper()
	rc.send(protocol.ClientMessage{Type: protocol.ClientHeartbeat, ClientID: rc.id, RequestID: "ping-" + rc.id})
	rc.ackOf("ping-" + rc.id)
}

// tool is one entry of a raw device's inventory.
var tool = servertest.Tool

// device enrolls id, connects and registers it with the given inventory.
func (ts *testServer) device(id string, tools ...protocol.MCPToolInfo) *rawClient {
	ts.t.Helper()
	rc := ts.mustDial(ts.enroll(id))
	rc.register(id, tools...)
	return rc
}

func (rc *rawClient) register(id string, tools ...protocol.MCPToolInfo) {
	rc.t.Helper()
	rc.id = id
	info := protocol.SystemInfo{DeviceID: id, Platform: "linux", Tools: tools}
	rc.send(protocol.ClientMessage{Type: protocol.ClientRegister, ClientType: protocol.ClientDevice, ClientID: id,
		RequestID: "reg-" + id, Metadata: map[string]any{protocol.MetadataSystemInfo: info}})
	ack := rc.recvType(protocol.ServerHeartbeat)
	require.Equal(rc.t, protocol.StatusOK, ack.Status)
}

// constellation connects with the operator token and registers id with
// target.
func (ts *testServer) constellation(id, target string) *rawClient {
	ts.t.Helper()
	rc := ts.mustDial(ts.api.Token)
	rc.id = id
	rc.send(protocol.ClientMessage{Type: protocol.ClientRegister, ClientType: protocol.ClientConstellation, ClientID: id, TargetID: target})
	rc.recvType(protocol.ServerHeartbeat)
	return rc
}

// results is the COMMAND_RESULTS of a device that gives every action of
// cmd the same status.
func (rc *rawClient) results(cmd protocol.ServerMessage, status protocol.ResultStatus, requestID string) *protocol.ClientMessage {
	results := make([]protocol.Result, len(cmd.Actions))
	for i, a := range cmd.Actions {
		results[i] = protocol.Result{Status: status, Result: map[string]any{"ran": a.ToolName}, CallID: a.CallID}
		if status != protocol.ResultSuccess {
			results[i].Error = "it broke"
		}
	}
	return &protocol.ClientMessage{Type: protocol.ClientCommandResults, Status: protocol.StatusContinue, ClientID: rc.id,
		SessionID: cmd.SessionID, PrevResponseID: cmd.ResponseID, RequestID: requestID, ActionResults: results}
}

// answer replies to a COMMAND with results for each action.
func (rc *rawClient) answer(cmd protocol.ServerMessage, status protocol.ResultStatus, requestID string) {
	rc.t.Helper()
	rc.send(*rc.results(cmd, status, requestID))
}

// serveOK answers every COMMAND with success until the link ends.
func (rc *rawClient) serveOK() {
	rc.serve(func(a protocol.Command) protocol.Result {
		return protocol.Result{Status: protocol.ResultSuccess, Result: map[string]any{"ran": a.ToolName}}
	})
}

// serve answers every COMMAND until the link ends, each action with the
// result answer makes for it.
func (rc *rawClient) serve(answer func(protocol.Command) protocol.Result) {
	go func() {
		for {
			m, err := rc.read()
			if err != nil {
				return
			}
			if m.Type != protocol.ServerCommand {
				continue
			}
			results := make([]protocol.Result, len(m.Actions))
			for i, a := range m.Actions {
				results[i] = answer(a)
				results[i].CallID = a.CallID
			}
			if rc.conn.Send(context.Background(), &protocol.ClientMessage{Type: protocol.ClientCommandResults, Status: protocol.StatusContinue,
				ClientID: rc.id, SessionID: m.SessionID, PrevResponseID: m.ResponseID, RequestID: "res-" + m.ResponseID, ActionResults: results}) != nil {
				return
			}
		}
	}()
}

// task sends a TASK with a plan and returns the ack.
func (rc *rawClient) task(sessionID, taskName, planDoc string) protocol.ServerMessage {
	rc.t.Helper()
	rc.send(protocol.ClientMessage{Type: protocol.ClientTask, Status: protocol.StatusContinue, ClientType: protocol.ClientConstellation,
		ClientID: rc.id, SessionID: sessionID, TaskName: taskName, Request: planDoc, RequestID: "task-" + sessionID})
	return rc.recv()
}
