package protocol

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deepCommand is a COMMAND of two actions whose first action's parameters
// nest depth arrays deep, in enc; the JSON keeps UFO's field order, so its
// response_id comes after the actions.
func deepCommand(t testing.TB, enc Encoding, depth int) []byte {
	t.Helper()
	const placeholder = "nested-goes-here"
	var b []byte
	var err error
	if enc == JSON {
		b = []byte(`{"type":"command","status":"continue","actions":[` +
			`{"tool_name":"deep","parameters":{"p":"` + placeholder + `"},"tool_type":"action","call_id":"call-1"},` +
			`{"tool_name":"hash_file","parameters":null,"tool_type":"data_collection","call_id":"call-2"}],` +
			`"session_id":"s-deep","response_id":"r-deep"}`)
	} else {
		b, err = CBOR.Marshal(map[string]any{
			"type": "command", "status": "continue", "session_id": "s-deep", "response_id": "r-deep",
			"actions": []any{
				map[string]any{"tool_name": "deep", "parameters": map[string]any{"p": placeholder}, "tool_type": "action", "call_id": "call-1"},
				map[string]any{"tool_name": "hash_file", "tool_type": "data_collection", "call_id": "call-2"},
			},
		})
		require.NoError(t, err)
	}
	old, nested := []byte(`"`+placeholder+`"`), append([]byte(strings.Repeat("[", depth)), strings.Repeat("]", depth)...)
	if enc == CBOR {
		old = append([]byte{0x60 | byte(len(placeholder))}, placeholder...)
		nested = append(bytes.Repeat([]byte{0x81}, depth), 0xf6) // [[[...null...]]]
	}
	require.Equal(t, 1, bytes.Count(b, old))
	return bytes.Replace(b, old, nested, 1)
}

func TestTheIDsOfACommandTooDeepToDecodeCanStillBeRead(t *testing.T) {
	for _, enc := range encodings {
		t.Run(enc.String(), func(t *testing.T) {
			frame := deepCommand(t, enc, MaxDepth+8)
			var m ServerMessage
			require.ErrorContains(t, enc.Unmarshal(frame, &m), "nesting deeper than 32 levels")
			ids := enc.readCommandIDs(frame)
			assert.Equal(t, "command", ids.typ)
			assert.Equal(t, "r-deep", ids.responseID)
			assert.Equal(t, "s-deep", ids.sessionID)
			assert.Equal(t, []string{"call-1", "call-2"}, ids.callIDs)
		})
	}
}

// The lenient read keeps a count, not a stack: no nesting a frame can hold
// makes it recurse.
func TestReadingIDsNeverRecursesIntoNesting(t *testing.T) {
	for _, enc := range encodings {
		frame := deepCommand(t, enc, 200_000)
		assert.Equal(t, []string{"call-1", "call-2"}, enc.readCommandIDs(frame).callIDs, enc)
	}
	// A CBOR array that claims more items than the frame holds.
	assert.Empty(t, CBOR.readCommandIDs([]byte{0xa1, 0x67, 'a', 'c', 't', 'i', 'o', 'n', 's', 0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}).callIDs)
	for _, junk := range []string{"", "[", "{", `{"actions":[{"call_id":`, `{"response_id":"r",`, "\xff"} {
		for _, enc := range encodings {
			enc.readCommandIDs([]byte(junk))
		}
	}
}

// A client answers a COMMAND it cannot decode but can name: a failure for
// each call_id, in COMMAND_RESULTS, so the server records them and sends
// it no more; such frames do not spend the bad-frame budget.
func TestAClientAnswersACommandTooDeepToDecodeWithAFailurePerCall(t *testing.T) {
	s := newTestServer(t, ConnOptions{}, 0)
	for _, enc := range encodings {
		t.Run(enc.String(), func(t *testing.T) {
			c, p := s.dial(enc, DialOptions{ConnOptions: ConnOptions{Reject: ClientErrorReply("kiosk-1"), Logger: quiet}})
			go func() {
				var m ServerMessage
				for c.Read(ctxT(t), &m) == nil {
				}
			}()
			frame := deepCommand(t, enc, MaxDepth+1)
			for i := range 2 * MaxBadFrames {
				require.NoError(t, p.conn.ws.Write(ctxT(t), frameTypeOf(enc), frame), "frame %d", i)
				got := recv(t, p.got)
				require.Equal(t, ClientCommandResults, got.Type, "frame %d: %+v", i, got)
				assert.Equal(t, "kiosk-1", got.ClientID)
				assert.Equal(t, "r-deep", got.PrevResponseID)
				assert.Equal(t, "s-deep", got.SessionID)
				assert.NotEmpty(t, got.RequestID, "so that the server's ack can name it")
				require.Len(t, got.ActionResults, 2)
				for j, r := range got.ActionResults {
					assert.Equal(t, fmt.Sprintf("call-%d", j+1), r.CallID)
					assert.Equal(t, ResultFailure, r.Status)
					assert.Contains(t, r.Error, "the agent could not read the command: ")
					assert.Contains(t, r.Error, "nesting deeper than 32 levels")
				}
			}
			select {
			case err := <-p.readErr:
				t.Fatalf("the link closed: %v", err)
			case <-time.After(50 * time.Millisecond):
			}
		})
	}
}

// A COMMAND whose response_id can be read but no call_id gets an ERROR
// that names it, for the server to fail the command at once.
func TestACommandWithoutReadableCallIDsGetsAnErrorNamingIt(t *testing.T) {
	s := newTestServer(t, ConnOptions{}, 0)
	c, p := s.dial(JSON, DialOptions{ConnOptions: ConnOptions{Reject: ClientErrorReply("kiosk-1"), Logger: quiet}})
	go func() {
		var m ServerMessage
		for c.Read(ctxT(t), &m) == nil {
		}
	}()
	deep := strings.Repeat("[", 40) + strings.Repeat("]", 40)
	frame := `{"type":"command","status":"continue","actions":[{"tool_name":"x","parameters":{"p":` + deep + `},"tool_type":"action"}],"response_id":"r-9"}`
	require.NoError(t, p.conn.ws.Write(ctxT(t), websocket.MessageText, []byte(frame)))
	got := recv(t, p.got)
	assert.Equal(t, ClientError, got.Type)
	assert.Equal(t, "r-9", got.PrevResponseID)
	assert.Contains(t, got.Error, "nesting deeper than 32 levels")
}

func FuzzReadCommandIDsCBOR(f *testing.F) {
	for _, g := range loadGolden(f) {
		f.Add(g.cbor)
	}
	f.Add(deepCommand(f, CBOR, MaxDepth+1))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzReadCommandIDs(t, CBOR, data) })
}

func FuzzReadCommandIDsJSON(f *testing.F) {
	for _, g := range loadGolden(f) {
		f.Add(g.ufoJSON)
	}
	f.Add(deepCommand(f, JSON, MaxDepth+1))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzReadCommandIDs(t, JSON, data) })
}

// fuzzReadCommandIDs checks that the lenient read takes any bytes, and
// that, of a frame that decodes, it reads what the decoder does.
func fuzzReadCommandIDs(t *testing.T, enc Encoding, data []byte) {
	ids := enc.readCommandIDs(data)
	var m ServerMessage
	if enc.Unmarshal(data, &m) != nil {
		return
	}
	assert.Equal(t, string(m.Type), ids.typ)
	assert.Equal(t, m.ResponseID, ids.responseID)
	assert.Equal(t, m.SessionID, ids.sessionID)
	assert.Equal(t, knownCallIDs(&m), ids.callIDs)
}
