package protocol

import (
	"encoding/json"
	"strconv"
	"testing"
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

// codecs are what the benchmarks compare: ours, and plain encoding/json
// (no limits, no validation) as the baseline.
var codecs = []struct {
	name      string
	marshal   func(any) ([]byte, error)
	unmarshal func([]byte, Message) error
}{
	{"encoding-json", json.Marshal, func(b []byte, m Message) error { return json.Unmarshal(b, m) }},
	{"cbor", CBOR.Marshal, CBOR.Unmarshal},
	{"json-strict", JSON.Marshal, JSON.Unmarshal},
}

func BenchmarkCommand5(b *testing.B) {
	benchCodecs(b, benchCommand(), func() Message { return &ServerMessage{} })
}

func BenchmarkCommandResults5(b *testing.B) {
	benchCodecs(b, benchResults(), func() Message { return &ClientMessage{} })
}

// benchCodecs measures one encode and one decode of m per op, and reports
// the frame size as wire-bytes. Compare with
// `benchstat -col /codec`: encoding/json is the first column, the base.
func benchCodecs(b *testing.B, m Message, newMsg func() Message) {
	for _, c := range codecs {
		b.Run("codec="+c.name, func(b *testing.B) {
			frame, err := c.marshal(m)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				out, err := c.marshal(m)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.unmarshal(out, newMsg()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(frame)), "wire-bytes")
		})
	}
}
