package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tooDeepCommand is a COMMAND, in enc, whose first action's parameters
// nest deeper than a decoder takes, and whose ids can all be read.
func tooDeepCommand(t *testing.T, enc protocol.Encoding, responseID string) protocol.Frame {
	t.Helper()
	var nested any = "bottom"
	for range protocol.MaxDepth {
		nested = []any{nested}
	}
	b, err := enc.Marshal(map[string]any{
		"type": "command", "status": "continue", "session_id": "s-deep", "response_id": responseID,
		"actions": []any{
			map[string]any{"tool_name": "echo", "tool_type": "action", "call_id": "call-1", "parameters": map[string]any{"p": nested}},
			map[string]any{"tool_name": "count", "tool_type": "action", "call_id": "call-2"},
		},
	})
	require.NoError(t, err)
	var m protocol.ServerMessage
	require.ErrorContains(t, enc.Unmarshal(b, &m), "nesting deeper than", "the frame is too deep to decode")
	return protocol.Frame{Encoding: enc, Data: b}
}

// A COMMAND the agent cannot decode but can name is answered with a
// failure for each of its calls, never by silence, which would leave it
// waiting its whole timeout; and such frames do not close the link, which
// would bring them back after the reconnect.
func TestACommandTooDeepToDecodeIsAnsweredWithAFailurePerCall(t *testing.T) {
	for _, wire := range []protocol.Encoding{protocol.CBOR, protocol.JSON} {
		t.Run(wire.String(), func(t *testing.T) {
			l := linkedOn(t, wire)

			for i := range protocol.MaxBadFrames + 2 {
				id := fmt.Sprintf("r-deep-%d", i)
				require.NoError(t, l.conn.SendFrame(context.Background(), tooDeepCommand(t, wire, id)))
				res := l.results(t, id)
				require.Len(t, res, 2, "frame %d", i)
				for j, r := range res {
					assert.Equal(t, fmt.Sprintf("call-%d", j+1), r.CallID)
					assert.Equal(t, protocol.ResultFailure, r.Status)
					assert.Contains(t, r.Error, "the agent could not read the command")
					assert.Contains(t, r.Error, "nesting deeper than 32 levels")
				}
			}

			m := newCommand("s1", action("count", nil))
			l.send(t, m)
			assert.EqualValues(t, 1, calls(t, l.results(t, m.ResponseID)), "the link is the same, and it works")
			select {
			case <-l.closed:
				t.Fatalf("the link closed: %v", l.readErr)
			case <-time.After(100 * time.Millisecond):
			}
		})
	}
}
