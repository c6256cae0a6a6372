package protocol

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// benchCommand is a COMMAND with 5 actions, as the server sends them.
func benchCommand() *ServerMessage {
	m := &ServerMessage{Type: ServerCommand, Status: StatusContinue,
		SessionID: "8c1e4f7a-2b3d-4e5f-8a9b-0c1d2e3f4a5b", ResponseID: "2e7c9a10-5b4d-4c3e-8f2a-9b8c7d6e5f40",
		Timestamp: "2026-11-21T08:00:00.123456789Z"}
	params := []map[string]any{
		{"path": "/data/kiosk/config.json"},
		{"url": "http://localhost:8080/", "timeout_ms": int64(20000), "headless": true},
		{"path": "/data/kiosk/note.txt", "content": "restarted by operator", "mode": int64(420)},
		{"path": "/data/kiosk", "recursive": false, "max_entries": int64(256)},
		{"selector": "#reload", "button": "left", "clicks": int64(1), "x": 0.5, "y": 0.25},
	}
	for i, p := range params {
		m.Actions = append(m.Actions, Command{ToolName: "tool_" + strconv.Itoa(i), Parameters: p,
			ToolType: ToolTypes[i%2], CallID: "5f0c2d9e-8a51-4c3b-9d0e-1a2b3c4d5e0" + strconv.Itoa(i)})
	}
	return m
}

// benchResults is the COMMAND_RESULTS a device answers benchCommand with.
func benchResults() *ClientMessage {
	m := &ClientMessage{Type: ClientCommandResults, Status: StatusContinue, ClientType: ClientDevice,
		ClientID: "kiosk-1", SessionID: "8c1e4f7a-2b3d-4e5f-8a9b-0c1d2e3f4a5b",
		RequestID: "0b9a8c7d-6e5f-4a3b-2c1d-0e9f8a7b6c5d", PrevResponseID: "2e7c9a10-5b4d-4c3e-8f2a-9b8c7d6e5f40",
		Timestamp: "2026-11-21T08:00:01.000250123Z"}
	results := []any{
		map[string]any{"sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "size": int64(4096)},
		map[string]any{"status": int64(200), "title": "Lobby kiosk"},
		map[string]any{"written": int64(21)},
		map[string]any{"entries": []any{"config.json", "note.txt", "media"}},
		true,
	}
	for i, r := range results {
		m.ActionResults = append(m.ActionResults, Result{Status: ResultSuccess, Result: r, Namespace: "stock",
			CallID: "5f0c2d9e-8a51-4c3b-9d0e-1a2b3c4d5e0" + strconv.Itoa(i),
			Usage:  &Usage{Fuel: 1234567 + uint64(i), WallMicros: 842, MemoryPages: 17, StdoutBytes: 98}})
	}
	return m
}

type namedMessage struct {
	name string
	m    Message
}

func benchMessages() []namedMessage {
	return []namedMessage{{"command5", benchCommand()}, {"results5", benchResults()}}
}

// codec is one way to put a message on the wire and take it off again.
// form turns our message into what the codec encodes.
type codec struct {
	name      string
	form      func(Message) any
	marshal   func(any) ([]byte, error)
	unmarshal func([]byte, any) error
}

// codecs are what the benchmarks compare: ours, and two baselines with
// plain encoding/json (no limits, no validation): on our structs, which
// leave absent fields out, and on UFO's frame shape, which sends every
// absent optional field as null, as pydantic does.
var codecs = []codec{
	{"encoding-json", asIs, json.Marshal, json.Unmarshal},
	{"cbor", asIs, CBOR.Marshal, unmarshalMessage(CBOR)},
	{"json-strict", asIs, JSON.Marshal, unmarshalMessage(JSON)},
	{"ufo-json", ufoShape, json.Marshal, json.Unmarshal},
}

func asIs(m Message) any { return m }

func unmarshalMessage(e Encoding) func([]byte, any) error {
	return func(b []byte, v any) error { return e.Unmarshal(b, v.(Message)) }
}

func BenchmarkCommand5(b *testing.B) { benchCodecs(b, benchCommand()) }

func BenchmarkCommandResults5(b *testing.B) { benchCodecs(b, benchResults()) }

// benchCodecs measures one encode and one decode of m per op, and reports
// the frame size as wire-bytes. Compare with
// `benchstat -col /codec`: encoding/json is the first column, the base.
func benchCodecs(b *testing.B, m Message) {
	for _, c := range codecs {
		b.Run("codec="+c.name, func(b *testing.B) {
			v := c.form(m)
			frame, err := c.marshal(v)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				out, err := c.marshal(v)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.unmarshal(out, newOf(v)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(frame)), "wire-bytes")
		})
	}
}

// BenchmarkSplit measures encoding and decoding apart, to show where the
// time of a round trip goes.
func BenchmarkSplit(b *testing.B) {
	for _, msg := range benchMessages() {
		for _, c := range codecs {
			v := c.form(msg.m)
			frame, err := c.marshal(v)
			require.NoError(b, err)
			b.Run("msg="+msg.name+"/op=encode/codec="+c.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := c.marshal(v); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("msg="+msg.name+"/op=decode/codec="+c.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := c.unmarshal(frame, newOf(v)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkFastPath measures the CBOR fast path alone, encode and decode
// apart, for every message shape: the golden frames, one per message type,
// and the two benchmark messages. Decode is decodeFast into a new message,
// without the defaults and Validate that Unmarshal adds, so the figures
// are those of the per-field code (RATIONALE.md, "Generated per-field
// code").
func BenchmarkFastPath(b *testing.B) {
	for _, s := range fastPathShapes(b) {
		m := s.newMsg()
		require.NoError(b, CBOR.Unmarshal(s.frame, m))
		b.Run("msg="+s.name+"/op=encode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := marshalCBOR(m); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("msg="+s.name+"/op=decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !decodeFast(s.frame, s.newMsg()) {
					b.Fatal("the fast decoder gave up")
				}
			}
		})
	}
}

// frameShape is a CBOR frame and a maker of the message it decodes into.
type frameShape struct {
	name   string
	frame  []byte
	newMsg func() Message
}

func fastPathShapes(b *testing.B) []frameShape {
	var shapes []frameShape
	for _, g := range loadGolden(b) {
		shapes = append(shapes, frameShape{g.name, g.cbor, g.newMessage})
	}
	for i, msg := range benchMessages() {
		frame, err := CBOR.Marshal(msg.m)
		require.NoError(b, err)
		shapes = append(shapes, frameShape{msg.name, frame, newMessages[i]})
	}
	return shapes
}

// BenchmarkWellformed measures fxamacker's well-formedness pass, which the
// fast decoder does without (RATIONALE.md, "Two decoders, one judge").
func BenchmarkWellformed(b *testing.B) {
	for _, msg := range benchMessages() {
		frame, err := CBOR.Marshal(msg.m)
		require.NoError(b, err)
		b.Run("msg="+msg.name, func(b *testing.B) {
			for b.Loop() {
				if err := cborDec.Wellformed(frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// newOf returns a pointer to a new zero value of what v points to.
func newOf(v any) any { return reflect.New(reflect.TypeOf(v).Elem()).Interface() }

// ufoServerMessage, ufoClientMessage, ufoCommand and ufoResult are UFO's
// pydantic models as encoding/json sees them: every optional field is
// sent, as null when absent, in the models' order.
type (
	ufoServerMessage struct {
		Type        string       `json:"type"`
		Status      string       `json:"status"`
		UserRequest *string      `json:"user_request"`
		AgentName   *string      `json:"agent_name"`
		ProcessName *string      `json:"process_name"`
		RootName    *string      `json:"root_name"`
		Actions     []ufoCommand `json:"actions"`
		Messages    []string     `json:"messages"`
		Error       *string      `json:"error"`
		SessionID   *string      `json:"session_id"`
		TaskName    *string      `json:"task_name"`
		Timestamp   *string      `json:"timestamp"`
		ResponseID  *string      `json:"response_id"`
		Result      any          `json:"result"`
	}
	ufoCommand struct {
		ToolName   string         `json:"tool_name"`
		Parameters map[string]any `json:"parameters"`
		ToolType   *string        `json:"tool_type"`
		CallID     *string        `json:"call_id"`
	}
	ufoClientMessage struct {
		Type           string         `json:"type"`
		Status         string         `json:"status"`
		ClientType     string         `json:"client_type"`
		SessionID      *string        `json:"session_id"`
		TaskName       *string        `json:"task_name"`
		ClientID       *string        `json:"client_id"`
		TargetID       *string        `json:"target_id"`
		Request        *string        `json:"request"`
		ActionResults  []ufoResult    `json:"action_results"`
		Timestamp      *string        `json:"timestamp"`
		RequestID      *string        `json:"request_id"`
		PrevResponseID *string        `json:"prev_response_id"`
		Error          *string        `json:"error"`
		Metadata       map[string]any `json:"metadata"`
	}
	// ufoResult carries usage, edgeaip's extension, as our frames do, so
	// that both shapes hold the same data.
	ufoResult struct {
		Status    string  `json:"status"`
		Error     *string `json:"error"`
		Result    any     `json:"result"`
		Namespace *string `json:"namespace"`
		CallID    *string `json:"call_id"`
		Usage     *Usage  `json:"usage,omitempty"`
	}
)

// ufoShape is m in UFO's frame shape.
func ufoShape(m Message) any {
	switch m := m.(type) {
	case *ServerMessage:
		u := &ufoServerMessage{Type: string(m.Type), Status: string(m.Status), UserRequest: opt(m.UserRequest),
			AgentName: opt(m.AgentName), ProcessName: opt(m.ProcessName), RootName: opt(m.RootName),
			Messages: m.Messages, Error: opt(m.Error), SessionID: opt(m.SessionID), TaskName: opt(m.TaskName),
			Timestamp: opt(m.Timestamp), ResponseID: opt(m.ResponseID), Result: m.Result}
		for _, c := range m.Actions {
			u.Actions = append(u.Actions, ufoCommand{c.ToolName, c.Parameters, opt(string(c.ToolType)), opt(c.CallID)})
		}
		return u
	case *ClientMessage:
		u := &ufoClientMessage{Type: string(m.Type), Status: string(m.Status), ClientType: string(m.ClientType),
			SessionID: opt(m.SessionID), TaskName: opt(m.TaskName), ClientID: opt(m.ClientID), TargetID: opt(m.TargetID),
			Request: opt(m.Request), Timestamp: opt(m.Timestamp), RequestID: opt(m.RequestID),
			PrevResponseID: opt(m.PrevResponseID), Error: opt(m.Error), Metadata: m.Metadata}
		for _, r := range m.ActionResults {
			u.ActionResults = append(u.ActionResults, ufoResult{string(r.Status), opt(r.Error), r.Result,
				opt(r.Namespace), opt(r.CallID), r.Usage})
		}
		return u
	}
	panic(fmt.Sprintf("not a message: %T", m))
}

// opt is an Optional[str]: nil for "".
func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// TestUFOShapeIsUFOsFrame holds ufoShape to the frames UFO's pydantic
// models emit: the same bytes, up to the order of keys inside free-form
// maps, which encoding/json sorts.
func TestUFOShapeIsUFOsFrame(t *testing.T) {
	for _, g := range loadGolden(t) {
		m := g.newMessage()
		require.NoError(t, JSON.Unmarshal(g.ufoJSON, m), g.name)
		b, err := marshalJSON(ufoShape(m))
		require.NoError(t, err)
		assert.Len(t, b, len(g.ufoJSON), "%s:\n got %s\nwant %s", g.name, b, g.ufoJSON)
	}
}

// TestCBORFrameSizes states how much smaller CBOR is than our JSON and
// than UFO's, for the benchmark messages and for the golden frames (one
// per message type); run it with -v for the figures in BENCHMARKS.md. The
// issue's goal, 30 % smaller, holds against UFO's frames over the golden
// set only (see RATIONALE.md, "Size").
func TestCBORFrameSizes(t *testing.T) {
	type sizes struct{ ufo, ours, cbor int }
	report := func(name string, s sizes) {
		t.Logf("%-28s UFO JSON %5d  our JSON %5d  CBOR %5d  vs our JSON %+4.0f %%  vs UFO JSON %+4.0f %%",
			name, s.ufo, s.ours, s.cbor, change(s.cbor, s.ours), change(s.cbor, s.ufo))
	}
	measure := func(name string, m Message) sizes {
		c, err := CBOR.Marshal(m)
		require.NoError(t, err)
		j, err := JSON.Marshal(m)
		require.NoError(t, err)
		u, err := marshalJSON(ufoShape(m))
		require.NoError(t, err)
		s := sizes{len(u), len(j), len(c)}
		report(name, s)
		assert.Less(t, s.cbor, s.ours, name)
		return s
	}
	measure("benchmark COMMAND", benchCommand())
	measure("benchmark COMMAND_RESULTS", benchResults())
	var all sizes
	for _, g := range loadGolden(t) {
		m := g.newMessage()
		require.NoError(t, CBOR.Unmarshal(g.cbor, m))
		s := measure(g.name, m)
		all = sizes{all.ufo + s.ufo, all.ours + s.ours, all.cbor + s.cbor}
	}
	report("all golden frames", all)
	assert.LessOrEqual(t, change(all.cbor, all.ufo), -30.0, "CBOR is at least 30 %% smaller than UFO's frames")
}

// change is the change from base to n in percent.
func change(n, base int) float64 { return 100 * float64(n-base) / float64(base) }

// BenchmarkEncodeFrame measures what Conn.Send does before it writes: a
// COMMAND and the acknowledgement of its results validated, checked for
// UTF-8 and encoded in CBOR, as the server sends them for every command.
func BenchmarkEncodeFrame(b *testing.B) {
	ack := &ServerMessage{Type: ServerHeartbeat, Status: StatusOK, SessionID: "8c1e4f7a-2b3d-4e5f-8a9b-0c1d2e3f4a5b",
		ResponseID: "0b9a8c7d-6e5f-4a3b-2c1d-0e9f8a7b6c5d", Timestamp: "2026-11-21T08:00:01.000250123Z"}
	for _, nm := range []namedMessage{{"command5", benchCommand()}, {"ack", ack}} {
		b.Run("msg="+nm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := CBOR.EncodeFrame(nm.m, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
