package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testFrames is the default link's frame cap.
var testFrames = frameCap{enc: protocol.CBOR, max: protocol.DefaultMaxFrameBytes}

// resultsOf is a COMMAND_RESULTS message with one result per payload,
// call_ids c0, c1, ...
func resultsOf(payloads ...string) *protocol.ClientMessage {
	m := &protocol.ClientMessage{Type: protocol.ClientCommandResults, Status: protocol.StatusContinue, ClientID: "dev-1",
		RequestID: "req-1", PrevResponseID: "resp-1"}
	for i, p := range payloads {
		m.ActionResults = append(m.ActionResults, protocol.Result{Status: protocol.ResultSuccess, CallID: fmt.Sprintf("c%d", i), Result: p})
	}
	return m
}

func TestAReplyThatFitsTheFrameIsLeftAlone(t *testing.T) {
	reply := resultsOf("a", "b")
	assert.Same(t, reply, testFrames.fit(reply))
}

func TestTheLargestResultsFailUntilTheReplyFitsTheFrame(t *testing.T) {
	c := frameCap{enc: protocol.CBOR, max: 10_000}
	reply := resultsOf(strings.Repeat("a", 3000), strings.Repeat("b", 6000), "c", strings.Repeat("d", 5000))
	got := c.fit(reply)

	n, err := c.size(got)
	require.NoError(t, err)
	assert.LessOrEqual(t, n, c.max)
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
	assert.Same(t, reply, frameCap{enc: protocol.CBOR, max: 10_000}.fit(reply))
	got := frameCap{enc: protocol.JSON, max: 10_000}.fit(reply)
	assert.Regexp(t, `^result of 180\d\d bytes exceeds the link's frame cap of 10000 bytes$`, got.ActionResults[0].Error)
}

func TestAReplyTooBigEvenAsFailuresHasEveryResultFailed(t *testing.T) {
	c := frameCap{enc: protocol.CBOR, max: 50}
	got := c.fit(resultsOf("a", "b"))
	for _, r := range got.ActionResults {
		assert.Equal(t, protocol.ResultFailure, r.Status)
	}
}

func TestAnMCPResultLargerThanAFrameFailsNamingTheTool(t *testing.T) {
	pool := newMCPPool(frameCap{enc: protocol.CBOR, max: 1024}, quietLog, func() {})
	t.Cleanup(pool.close)
	r := &Router{computers: newComputerManager(defaultAction(testMCPStdio(t, "helper")), nil, nil, pool, quietLog), log: quietLog}

	res := one(t, r, Target{}, action("say", map[string]any{"text": strings.Repeat("x", 2000)}))
	assert.Equal(t, protocol.ResultFailure, res.Status)
	assert.Regexp(t, `^tool "say" of MCP server "helper": result of 20\d\d bytes exceeds the link's frame cap of 1024 bytes$`, res.Error)
	assert.Equal(t, "call-say", res.CallID)
	res = one(t, r, Target{}, action("say", map[string]any{"text": "short"}))
	assert.Equal(t, "short", res.Result)
}
