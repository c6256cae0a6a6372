package encodedonce

import (
	"encoding/json"
	"testing"

	"github.com/edgeaip/edgeaip/internal/encodecount"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// params are values whose encodings differ between encoders if anything
// does: HTML's characters, which encoding/json escapes and the JSON wire
// does not; floats of each CBOR width; nesting; text beyond ASCII.
func params() map[string]any {
	return map[string]any{
		"html": "<a href='x'>&</a>", "half": 1.5, "single": 3.4028234663852886e38, "double": 0.1, "int": float64(1 << 40),
		"nested": map[string]any{"list": []any{"é", nil, true, map[string]any{}}}, "empty": "",
	}
}

// What was written before values were wrapped is written byte for byte
// the same after: the store's columns and the audit log, and each wire's
// frames, so that a data dir reads back as it did and devices see no
// change.
func TestWrappedParametersEncodeAsTheValuesDo(t *testing.T) {
	wrapped := params()
	Wrap(wrapped)
	for _, enc := range []func(any) ([]byte, error){json.Marshal, protocol.JSON.Marshal, protocol.CBOR.Marshal} {
		for range 2 { // the second time from what the first kept
			want, err := enc(frame(params()))
			require.NoError(t, err)
			got, err := enc(frame(wrapped))
			require.NoError(t, err)
			assert.Equal(t, want, got)
		}
	}
}

func frame(p map[string]any) *protocol.ServerMessage {
	return &protocol.ServerMessage{Type: protocol.ServerCommand, Status: protocol.StatusContinue, SessionID: "s", ResponseID: "r",
		Actions: []protocol.Command{{ToolName: "echo", Parameters: p, CallID: "c"}}}
}

func TestAWrappedValueIsEncodedOncePerFormatAndReadsAsItself(t *testing.T) {
	counted := encodecount.New()
	p := map[string]any{"v": counted, "s": "text"}
	Wrap(p)
	Wrap(p) // a value already wrapped is not wrapped again
	for range 3 {
		_, err := json.Marshal(frame(p))
		require.NoError(t, err)
		_, err = protocol.CBOR.Marshal(frame(p))
		require.NoError(t, err)
	}
	assert.EqualValues(t, 1, counted.JSON())
	assert.EqualValues(t, 1, counted.CBOR())
	assert.Equal(t, "text", Unwrap(p["s"]))
	assert.Equal(t, map[string]any{"v": counted, "s": "text"}, Plain(p))
	assert.Equal(t, 42, Unwrap(42), "a value not wrapped reads as it is")
}
