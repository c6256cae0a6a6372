package reply

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAReplyReadBackKnowsItsIDs(t *testing.T) {
	for _, enc := range []protocol.Encoding{protocol.CBOR, protocol.JSON} {
		r, err := Encode(resultsOf("a", "b"), enc, quietLog)
		require.NoError(t, err)
		back, err := Decode(r.Frame())
		require.NoError(t, err)
		assert.Equal(t, r, back, enc)
		assert.Equal(t, "resp-1", back.ResponseID())
		assert.Equal(t, "req-1", back.RequestID())
		assert.Equal(t, []string{"c0", "c1"}, back.CallIDs())
	}
}

func TestAReplyInTheOtherEncodingIsEncodedAnew(t *testing.T) {
	m := resultsOf("a")
	cbor, err := Encode(m, protocol.CBOR, quietLog)
	require.NoError(t, err)
	same, err := cbor.In(protocol.CBOR, quietLog)
	require.NoError(t, err)
	assert.Equal(t, cbor, same, "already in it: left as it is")

	json, err := cbor.In(protocol.JSON, quietLog)
	require.NoError(t, err)
	want, err := Encode(m, protocol.JSON, quietLog)
	require.NoError(t, err)
	assert.Equal(t, want, json)
}

func TestInvalidUTF8IsReplacedOnceWhenEncodedAndLogged(t *testing.T) {
	var logs testenv.LogBuffer
	m := resultsOf("bad \xff")
	r, err := Encode(m, protocol.CBOR, testLogger(&logs))
	require.NoError(t, err)
	assert.Equal(t, "bad \ufffd", sent(t, r).ActionResults[0].Result)
	assert.Equal(t, "bad \xff", m.ActionResults[0].Result, "the message given is not changed")
	assert.Contains(t, logs.String(), "invalid UTF-8 replaced before sending")
}

func TestAFailedReplyAnswersEveryCallOfTheSameMessage(t *testing.T) {
	r, err := Encode(resultsOf("a", "b"), protocol.CBOR, quietLog)
	require.NoError(t, err)
	f := r.Failed("why")
	assert.Equal(t, protocol.FailAll([]string{"c0", "c1"}, "why"), f.ActionResults)
	f.ActionResults = nil
	want := resultsOf()
	assert.Equal(t, want, f)
}

func TestLinesAboutAReplyNameItsCommandAndRequest(t *testing.T) {
	var logs testenv.LogBuffer
	r, err := Encode(resultsOf("a", "b"), protocol.CBOR, quietLog)
	require.NoError(t, err)
	r.Log(testLogger(&logs)).Info("results acknowledged")
	for _, want := range []string{"session_id=s-1", "response_id=resp-1", "call_id=c0,c1", "request_id=req-1"} {
		assert.True(t, strings.Contains(logs.String(), want), "%q in %q", want, logs.String())
	}
}

func testLogger(w *testenv.LogBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func TestAReplyReadBackKeepsOnlyItsBytesOfTheResults(t *testing.T) {
	m := resultsOf("a")
	m.ActionResults[0].Result = map[string]any{"deep": []any{map[string]any{"n": int64(1)}}}
	r, err := Encode(m, protocol.CBOR, quietLog)
	require.NoError(t, err)
	back, err := Decode(r.Frame())
	require.NoError(t, err)
	assert.Nil(t, back.head.ActionResults, "the results live in the frame only")
	assert.Equal(t, m.ActionResults, sent(t, back).ActionResults)

	_, err = Decode(protocol.Frame{Encoding: protocol.CBOR, Data: []byte{0xa1, 0x61}})
	assert.Error(t, err, "a frame that does not decode")
}
