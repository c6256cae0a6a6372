package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ufoFrame reads a frame exactly as UFO's pydantic models emit it.
func ufoFrame(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.Root(), "testdata", "protocol", name+".ufo.json"))
	require.NoError(t, err)
	return string(b)
}

// ufoDevice is a raw WebSocket peer that talks as UFO's device client does:
// no subprotocol, ?token= in the URL, JSON text frames.
type ufoDevice struct {
	t    *testing.T
	ws   *websocket.Conn
	sent []string // frames the server sent, for pydantic to check
}

func dialUFO(t *testing.T, c *cluster, tokenFile string) *ufoDevice {
	t.Helper()
	token, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, c.wsURL()+"?token="+url.QueryEscape(strings.TrimSpace(string(token))), nil)
	require.NoError(t, err)
	require.Empty(t, ws.Subprotocol(), "no subprotocol was offered, none is chosen")
	t.Cleanup(func() { ws.CloseNow() })
	return &ufoDevice{t: t, ws: ws}
}

func (d *ufoDevice) send(frame string) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(d.t, d.ws.Write(ctx, websocket.MessageText, []byte(frame)))
}

// recv reads the server's next frame; it must be a JSON text frame that
// decodes strictly and that UFO's ServerMessage can hold.
func (d *ufoDevice) recv() protocol.ServerMessage {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	typ, b, err := d.ws.Read(ctx)
	require.NoError(d.t, err)
	require.Equal(d.t, websocket.MessageText, typ)
	d.sent = append(d.sent, string(b))
	assertOnlyUFOKeys(d.t, b)
	var m protocol.ServerMessage
	require.NoError(d.t, protocol.JSON.Unmarshal(b, &m), "%s", b)
	return m
}

// ufoServerKeys are the fields of UFO's ServerMessage, and of its Command.
var (
	ufoServerKeys  = []string{"type", "status", "user_request", "agent_name", "process_name", "root_name", "actions", "messages", "error", "session_id", "task_name", "timestamp", "response_id", "result"}
	ufoCommandKeys = []string{"tool_name", "parameters", "tool_type", "call_id"}
)

// assertOnlyUFOKeys checks that a server frame carries nothing but UFO's
// fields, and that every action names a tool_type, which UFO's Command
// requires.
func assertOnlyUFOKeys(t *testing.T, frame []byte) {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(frame, &m))
	for k := range m {
		assert.Contains(t, ufoServerKeys, k, "server frame key")
	}
	var actions []map[string]json.RawMessage
	if raw, ok := m["actions"]; ok {
		require.NoError(t, json.Unmarshal(raw, &actions))
	}
	for _, a := range actions {
		for k := range a {
			assert.Contains(t, ufoCommandKeys, k, "command key")
		}
		assert.Contains(t, a, "tool_type", "UFO's Command requires tool_type")
	}
}

// checkWithPydantic has UFO's models (restated in ufo_wire.py) validate
// every frame the server sent.
func (d *ufoDevice) checkWithPydantic() {
	d.t.Run("pydantic reads what the server sent", func(t *testing.T) {
		testenv.CheckWithPydantic(t, "server", d.sent)
	})
}

// TestUFODeviceClientWorksWithOurServer replays UFO's own frames, byte for
// byte, against the server: register, heartbeat, a command and its
// command_results, and a bad frame on the way.
func TestUFODeviceClientWorksWithOurServer(t *testing.T) {
	c := newCluster(t)
	d := dialUFO(t, c, c.enroll("kiosk-1"))

	d.send(ufoFrame(t, "client_register"))
	ack := d.recv()
	assert.Equal(t, protocol.ServerHeartbeat, ack.Type, "the ack of a registration is a heartbeat")
	assert.Equal(t, protocol.StatusOK, ack.Status)
	c.waitOnline("kiosk-1", true)
	info := c.device("kiosk-1").Info
	require.NotNil(t, info, "UFO's system_info is read from the register metadata")
	assert.Equal(t, "kiosk-1", info.DeviceID)
	assert.Equal(t, 4, info.CPUCount)
	assert.Equal(t, 7.63, info.MemoryTotalGB)
	assert.Equal(t, []string{"gui", "cli", "browser", "file_system", "office", "linux_apps"}, info.SupportedFeatures)

	d.send(ufoFrame(t, "client_heartbeat"))
	hb := d.recv()
	assert.Equal(t, protocol.ServerHeartbeat, hb.Type)
	assert.Equal(t, protocol.StatusOK, hb.Status)

	d.send(`{"type":"heartbeat","status":"sleepy","client_type":"device","client_id":"kiosk-1","request_id":"r-bad"}`)
	e := d.recv()
	assert.Equal(t, protocol.ServerError, e.Type)
	assert.Contains(t, e.Error, `field "status": unknown value "sleepy"`)
	assert.Equal(t, "r-bad", e.ResponseID)

	// The operator runs seven actions; the UFO device answers with the
	// results of client_command_results.ufo.json, ids swapped for the
	// command's, falsy results included.
	actions := make([]protocol.Command, 7)
	for i := range actions {
		actions[i] = protocol.Command{ToolName: "tool_" + string(rune('a'+i)), ToolType: protocol.ToolTypes[i%2],
			Parameters: map[string]any{"n": i}}
	}
	type outcome struct {
		resp api.CommandResponse
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		resp, err := c.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: actions, Timeout: "20s"})
		done <- outcome{resp, err}
	}()
	cmd := d.recv()
	require.Equal(t, protocol.ServerCommand, cmd.Type)
	require.Len(t, cmd.Actions, 7)
	require.NotEmpty(t, cmd.ResponseID)
	assert.Equal(t, int64(3), cmd.Actions[3].Parameters["n"])

	frame := ufoFrame(t, "client_command_results")
	frame = strings.ReplaceAll(frame, "2e7c9a10-5b4d-4c3e-8f2a-9b8c7d6e5f40", cmd.ResponseID)
	frame = strings.ReplaceAll(frame, "8c1e4f7a-2b3d-4e5f-8a9b-0c1d2e3f4a5b", cmd.SessionID)
	for i, a := range cmd.Actions {
		frame = strings.ReplaceAll(frame, "5f0c2d9e-8a51-4c3b-9d0e-1a2b3c4d5e0"+string(rune('1'+i)), a.CallID)
	}
	d.send(frame)
	out := <-done
	require.NoError(t, out.err)
	res := out.resp.Results
	require.Len(t, res, 7)
	for i, r := range res {
		assert.Equal(t, cmd.Actions[i].CallID, r.CallID)
	}
	assert.Equal(t, map[string]any{"sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "size": 4096.0}, res[0].Result)
	assert.Equal(t, "stock", res[0].Namespace)
	assert.Equal(t, []any{false, 0.0, "", []any{}}, []any{res[1].Result, res[2].Result, res[3].Result, res[4].Result},
		"falsy results reach the operator")
	assert.Equal(t, protocol.ResultFailure, res[5].Status)
	assert.Equal(t, "open /etc/shadow: permission denied", res[5].Error)
	assert.Equal(t, protocol.ResultSkipped, res[6].Status)

	d.send(ufoFrame(t, "client_heartbeat"))
	assert.Equal(t, protocol.ServerHeartbeat, d.recv().Type, "no error came back for the results, and the link is up")

	// An operator who names no tool_type, as aipctl exec does by default:
	// UFO's Command requires one, and a UFO device lists no tools to find
	// it in, so the server refuses rather than send what UFO would reject.
	resp, err := c.api.Command(context.Background(), "kiosk-1", api.CommandRequest{
		Actions: []protocol.Command{{ToolName: "hash_file", Parameters: map[string]any{"path": "/x"}}}, Timeout: "5s"})
	var refusal string
	if err != nil {
		refusal = err.Error()
	} else {
		refusal = resp.FirstError()
	}
	assert.Contains(t, refusal, `speaks UFO's JSON and does not list "hash_file": give its tool_type`)
	d.send(ufoFrame(t, "client_heartbeat"))
	assert.Equal(t, protocol.ServerHeartbeat, d.recv().Type, "no command was sent")
	d.checkWithPydantic()
}

// sniffProxy forwards TCP to a target and keeps the first bytes each
// client sends, to see what went on the wire.
type sniffProxy struct {
	ln   net.Listener
	mu   sync.Mutex
	recs []*capWriter // per connection, what the client sent
}

func newSniffProxy(t *testing.T, target string) *sniffProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &sniffProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			t.Cleanup(func() { in.Close(); out.Close() })
			rec := &capWriter{limit: 8 << 10}
			p.mu.Lock()
			p.recs = append(p.recs, rec)
			p.mu.Unlock()
			go func() { io.Copy(io.MultiWriter(out, rec), in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	return p
}

// firstSent is what the first client sent so far.
func (p *sniffProxy) firstSent() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.recs) == 0 {
		return nil
	}
	return p.recs[0].bytes()
}

// capWriter keeps the first limit bytes written to it.
type capWriter struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

func (w *capWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.limit - len(w.buf); room > 0 {
		w.buf = append(w.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (w *capWriter) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.buf)
}

// firstFrameOpcode finds the opcode of the first WebSocket frame after the
// HTTP upgrade request in what a client sent.
func firstFrameOpcode(sent []byte) (byte, bool) {
	i := bytes.Index(sent, []byte("\r\n\r\n"))
	if i < 0 || len(sent) <= i+4 {
		return 0, false
	}
	return sent[i+4] & 0x0f, true
}

func TestOurAgentSpeaksJSONToOurServer(t *testing.T) {
	c := newCluster(t)
	proxy := newSniffProxy(t, strings.TrimPrefix(c.http.URL, "http://"))
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), func(cfg *agent.Config) {
		cfg.Wire = protocol.JSON
		cfg.ServerURL = "ws://" + proxy.ln.Addr().String() + "/ws"
	})

	r := onlyResult(t, c.exec("kiosk-1", "echo", map[string]any{"ok": false, "n": 0, "s": ""}, 10*time.Second))
	require.Equal(t, protocol.ResultSuccess, r.Status, r.Error)
	assert.Equal(t, map[string]any{"ok": false, "n": 0.0, "s": ""}, r.Result)
	require.NotNil(t, r.Usage, "our extension travels in JSON too")

	var sent []byte
	require.Eventually(t, func() bool {
		sent = proxy.firstSent()
		_, ok := firstFrameOpcode(sent)
		return ok
	}, 10*time.Second, 10*time.Millisecond)
	assert.NotContains(t, strings.ToLower(string(sent)), "sec-websocket-protocol", "the JSON agent offers no subprotocol")
	op, _ := firstFrameOpcode(sent)
	assert.Equal(t, byte(0x1), op, "its first frame, REGISTER, is text")
}
