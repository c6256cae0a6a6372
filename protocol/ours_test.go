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
		&ClientMessage{Type: ClientTokenRotated, Status: StatusOK, ClientID: "kiosk-1", PrevResponseID: "r-1"},
	}
}

// The token rotation messages are ours, not UFO's: the CBOR wire carries
// them, field for field, in the bytes fxamacker writes.
func TestOurMessagesTravelOnTheCBORWire(t *testing.T) {
	want := []string{
		`{"type": "rotate_token", "token": "aipd_new", "status": "ok", "response_id": "r-1"}`,
		`{"type": "token_rotated", "status": "ok", "client_id": "kiosk-1", "client_type": "device", "prev_response_id": "r-1"}`,
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
