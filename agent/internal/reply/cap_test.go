package reply

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// testCap is the default link's frame cap.
var testCap = Cap{Enc: protocol.CBOR, Max: protocol.DefaultMaxFrameBytes}

// resultsOf is a COMMAND_RESULTS message with one result per payload,
// call_ids c0, c1, ...
func resultsOf(payloads ...string) *protocol.ClientMessage {
	m := &protocol.ClientMessage{Type: protocol.ClientCommandResults, Status: protocol.StatusContinue, ClientID: "dev-1",
		SessionID: "s-1", RequestID: "req-1", PrevResponseID: "resp-1"}
	for i, p := range payloads {
		m.ActionResults = append(m.ActionResults, protocol.Result{Status: protocol.ResultSuccess, CallID: fmt.Sprintf("c%d", i), Result: p})
	}
	return m
}

// sent is the message r's frame carries, as the server reads it.
func sent(t *testing.T, r Reply) *protocol.ClientMessage {
	t.Helper()
	var m protocol.ClientMessage
	require.NoError(t, r.Frame().Encoding.UnmarshalValue(r.Frame().Data, &m))
	return &m
}

func fit(t *testing.T, c Cap, m *protocol.ClientMessage) Reply {
	t.Helper()
	r, err := c.Fit(m, quietLog)
	require.NoError(t, err)
	return r
}

func TestAReplyThatFitsTheFrameIsEncodedOnceAsItIs(t *testing.T) {
	reply := resultsOf("a", "b")
	r := fit(t, testCap, reply)
	want, err := protocol.CBOR.Marshal(reply)
	require.NoError(t, err)
	assert.Equal(t, protocol.Frame{Encoding: protocol.CBOR, Data: want}, r.Frame(), "the bytes the link sends")
	assert.Equal(t, int64(len(want)), r.Size())
}

func TestTheLargestResultsFailUntilTheReplyFitsTheFrame(t *testing.T) {
	c := Cap{Enc: protocol.CBOR, Max: 10_000}
	reply := resultsOf(strings.Repeat("a", 3000), strings.Repeat("b", 6000), "c", strings.Repeat("d", 5000))
	r := fit(t, c, reply)

	assert.LessOrEqual(t, r.Size(), c.Max)
	got := sent(t, r)
	assert.Equal(t, []string{"c0", "c1", "c2", "c3"}, protocol.ResultCallIDs(got.ActionResults))
	assert.Equal(t, protocol.ResultFailure, got.ActionResults[1].Status)
	assert.Regexp(t, `^result of 60\d\d bytes exceeds the link's frame cap of 10000 bytes$`, got.ActionResults[1].Error)
	for _, i := range []int{0, 2, 3} {
		assert.Equal(t, reply.ActionResults[i], got.ActionResults[i], "only as many fail as must")
	}
	assert.Equal(t, protocol.ResultSuccess, reply.ActionResults[1].Status, "the reply given is not changed")
}

func TestResultsAreMeasuredAsTheLinkEncodesThem(t *testing.T) {
	// JSON escapes a control character in six bytes; CBOR takes one.
	reply := resultsOf(strings.Repeat("\x01", 3000))
	assert.Equal(t, reply.ActionResults, sent(t, fit(t, Cap{Enc: protocol.CBOR, Max: 10_000}, reply)).ActionResults)
	r := fit(t, Cap{Enc: protocol.JSON, Max: 10_000}, reply)
	assert.Equal(t, protocol.JSON, r.Frame().Encoding)
	assert.Regexp(t, `^result of 180\d\d bytes exceeds the link's frame cap of 10000 bytes$`, sent(t, r).ActionResults[0].Error)
}

func TestAReplyTooBigEvenAsFailuresHasEveryResultFailed(t *testing.T) {
	r := fit(t, Cap{Enc: protocol.CBOR, Max: 50}, resultsOf("a", "b"))
	for _, res := range sent(t, r).ActionResults {
		assert.Equal(t, protocol.ResultFailure, res.Status)
	}
}

func TestAReplyThatCannotBeEncodedIsRefused(t *testing.T) {
	_, err := testCap.Fit(&protocol.ClientMessage{Type: protocol.ClientCommandResults}, quietLog)
	assert.ErrorContains(t, err, `field "status": missing`)
}
