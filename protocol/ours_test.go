package protocol

import (
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ourMessages are edgeaip's own message types, one of each, as they go out.
func ourMessages() []Message {
	return []Message{
		&ServerMessage{Type: ServerRotateToken, Status: StatusOK, ResponseID: "r-1", Token: "aipd_new"},
		&ServerMessage{Type: ServerCancelCommand, Status: StatusOK, ResponseID: "r-2", Error: "cancelled by the MCP client"},
		&ClientMessage{Type: ClientTokenRotated, Status: StatusOK, ClientID: "kiosk-1", PrevResponseID: "r-1"},
		&ClientMessage{Type: ClientLocalCall, Status: StatusOK, ClientID: "kiosk-1", RequestID: "q-1", PrevResponseID: "local-1",
			Actions:       []Command{{ToolName: "echo", ToolType: ToolAction, CallID: "local-1"}},
			ActionResults: []Result{{Status: ResultSuccess, CallID: "local-1"}}},
		&ClientMessage{Type: ClientPreparing, Status: StatusContinue, ClientID: "kiosk-1", PrevResponseID: "r-3",
			Preparing: &Preparing{ToolName: "hash_file", Stage: "initializing", Step: 2, Steps: 3}},
	}
}

// The token rotation messages are ours, not UFO's: the CBOR wire carries
// them, field for field, in the bytes fxamacker writes.
func TestOurMessagesTravelOnTheCBORWire(t *testing.T) {
	want := []string{
		`{"type": "rotate_token", "token": "aipd_new", "status": "ok", "response_id": "r-1"}`,
		`{"type": "cancel_command", "error": "cancelled by the MCP client", "status": "ok", "response_id": "r-2"}`,
		`{"type": "token_rotated", "status": "ok", "client_id": "kiosk-1", "client_type": "device", "prev_response_id": "r-1"}`,
		`{"type": "local_call", "status": "ok", "actions": [{"call_id": "local-1", "tool_name": "echo", "tool_type": "action"}], "client_id": "kiosk-1", "request_id": "q-1", "client_type": "device", "action_results": [{"status": "success", "call_id": "local-1"}], "prev_response_id": "local-1"}`,
		`{"type": "preparing", "status": "continue", "client_id": "kiosk-1", "preparing": {"step": 2, "stage": "initializing", "steps": 3, "tool_name": "hash_file"}, "client_type": "device", "prev_response_id": "r-3"}`,
	}
	for i, m := range ourMessages() {
		if cm, ok := m.(*ClientMessage); ok {
			cm.applyDefaults()
		}
		b, err := CBOR.Marshal(m)
		require.NoError(t, err)
		diag, err := cbor.Diagnose(b)
		require.NoError(t, err)
		assert.Equal(t, want[i], diag)
		requireFastEncodeMatches(t, m)

		back := newLike(m)
		require.NoError(t, CBOR.Unmarshal(b, back))
		assert.Equal(t, m, back)
	}
}

// The JSON wire follows UFO's models, which have no such types: it
// neither sends nor accepts them, and says why.
func TestTheJSONWireRefusesOurMessages(t *testing.T) {
	for _, m := range ourMessages() {
		_, err := JSON.EncodeFrame(m, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "edgeaip's own message type, carried on the CBOR wire (aip.cbor.v1) only")

		b, err := marshalJSON(m) // as a peer that sent one anyway would
		require.NoError(t, err)
		err = JSON.Unmarshal(b, newLike(m))
		require.Error(t, err)
		assert.True(t, IsMalformed(err), "a frame the connection answers with an ERROR and survives: %v", err)
		assert.Contains(t, err.Error(), `field "type": "`)
	}
}

// A local_call reports calls: each with its result.
func TestALocalCallNamesEachCallWithItsResult(t *testing.T) {
	m := &ClientMessage{Type: ClientLocalCall, Status: StatusOK}
	assert.EqualError(t, m.Validate(), `field "actions": missing`)
	m.Actions = []Command{{ToolName: "echo"}}
	assert.EqualError(t, m.Validate(), `field "action_results": want one for each of the 1 actions, got "0"`)
	m.ActionResults = []Result{{Status: ResultSuccess}}
	assert.NoError(t, m.Validate())
	m.Actions[0].ToolName = ""
	assert.EqualError(t, m.Validate(), `field "actions[0].tool_name": missing`)
}

// A preparing message names its command, its tool and a stage it knows.
func TestAPreparingMessageNamesItsCommandToolAndStage(t *testing.T) {
	m := &ClientMessage{Type: ClientPreparing, Status: StatusContinue}
	assert.EqualError(t, m.Validate(), `field "prev_response_id": missing`)
	m.PrevResponseID = "r-1"
	assert.EqualError(t, m.Validate(), `field "preparing": missing`)
	m.Preparing = &Preparing{Stage: "compiling", Step: 2, Steps: 2}
	assert.EqualError(t, m.Validate(), `field "preparing.tool_name": missing`)
	m.Preparing.ToolName = "hash_file"
	assert.NoError(t, m.Validate())
	m.Preparing.Stage = "baking"
	assert.EqualError(t, m.Validate(), `field "preparing.stage": unknown value "baking"`)
	m.Preparing.Stage, m.Preparing.Step = "ready", 3
	assert.ErrorContains(t, m.Validate(), `field "preparing.step": want at most steps (2)`)
}

func TestACancelCommandNamesItsCommand(t *testing.T) {
	m := &ServerMessage{Type: ServerCancelCommand, Status: StatusOK}
	assert.EqualError(t, m.Validate(), `field "response_id": missing`)
}

func TestARotateTokenWithoutATokenIsRefused(t *testing.T) {
	m := &ServerMessage{Type: ServerRotateToken, Status: StatusOK, ResponseID: "r-1"}
	assert.EqualError(t, m.Validate(), `field "token": missing`)
}

// newLike returns an empty message of m's kind.
func newLike(m Message) Message {
	if _, ok := m.(*ServerMessage); ok {
		return &ServerMessage{}
	}
	return &ClientMessage{}
}
