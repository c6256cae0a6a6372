package protocol

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sampleCommand() *ServerMessage {
	return &ServerMessage{
		Type: ServerCommand, Status: StatusContinue, SessionID: "s-1", ResponseID: "r-1", Timestamp: "2026-11-21T08:00:00Z",
		Actions: []Command{{ToolName: "hash_file", ToolType: ToolDataCollection, CallID: "c-1", Parameters: map[string]any{"path": "/data/x"}}},
	}
}

func TestBothEncodingsRoundTrip(t *testing.T) {
	for _, enc := range []Encoding{CBOR, JSON} {
		b, err := enc.Marshal(sampleCommand())
		require.NoError(t, err)
		var got ServerMessage
		require.NoError(t, enc.Unmarshal(b, &got), enc)
		assert.Equal(t, sampleCommand(), &got, enc)
	}
}

func TestCBORIsDeterministic(t *testing.T) {
	a, err := CBOR.Marshal(sampleCommand())
	require.NoError(t, err)
	for range 20 {
		b, err := CBOR.Marshal(sampleCommand())
		require.NoError(t, err)
		assert.Equal(t, a, b)
	}
}

func TestClientTypeDefaultsToDevice(t *testing.T) {
	var m ClientMessage
	require.NoError(t, JSON.Unmarshal([]byte(`{"type":"heartbeat","status":"ok","client_id":null}`), &m))
	assert.Equal(t, ClientDevice, m.ClientType)
}

func TestDecodingRejectsWithThePreciseReason(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40)
	for in, want := range map[string]string{
		`{"status":"ok"}`:                                          `field "type": missing`,
		`{"type":"heartbeat"}`:                                     `field "status": missing`,
		`{"type":"dance","status":"ok"}`:                           `field "type": unknown value "dance"`,
		`{"type":"heartbeat","status":"meh"}`:                      `field "status": unknown value "meh"`,
		`{"type":"heartbeat","status":"ok","client_type":"robot"}`: `field "client_type": unknown value "robot"`,
		`{"type":"command_results","status":"ok","action_results":[{"status":"great"}]}`: `field "action_results[0].status": unknown value "great"`,
		`{"type":"heartbeat","type":"heartbeat","status":"ok"}`:                          `duplicate key "type"`,
		`{"type":"heartbeat","status":"ok","metadata":` + deep + `}`:                     "nesting deeper than 32",
		"{\"type\":\"heartbeat\",\"status\":\"ok\",\"error\":\"\xff\"}":                  "invalid UTF-8",
	} {
		var m ClientMessage
		err := JSON.Unmarshal([]byte(in), &m)
		require.ErrorIs(t, err, ErrMalformed, in)
		assert.ErrorContains(t, err, want, in)
	}
}

func TestCBORRejectsDuplicateKeys(t *testing.T) {
	// {"type":"heartbeat","type":"heartbeat","status":"ok"}
	in := []byte("\xa3\x64type\x69heartbeat\x64type\x69heartbeat\x66status\x62ok")
	var m ClientMessage
	err := CBOR.Unmarshal(in, &m)
	require.ErrorIs(t, err, ErrMalformed)
	assert.ErrorContains(t, err, "duplicate map key")
}

func TestUnknownKeysAreIgnored(t *testing.T) {
	var m ServerMessage
	require.NoError(t, JSON.Unmarshal([]byte(`{"type":"heartbeat","status":"ok","future_field":[1,2]}`), &m))
	assert.Equal(t, ServerHeartbeat, m.Type)
}

func TestCommandMayLeaveToolTypeOut(t *testing.T) {
	var m ServerMessage
	require.NoError(t, JSON.Unmarshal([]byte(`{"type":"command","status":"continue","actions":[{"tool_name":"x"}]}`), &m))
	err := JSON.Unmarshal([]byte(`{"type":"command","status":"continue","actions":[{"tool_name":"x","tool_type":"magic"}]}`), &m)
	assert.ErrorContains(t, err, `field "actions[0].tool_type": unknown value "magic"`)
}
