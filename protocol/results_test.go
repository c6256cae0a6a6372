package protocol

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFailAllGivesEveryCallAFailureWithItsID(t *testing.T) {
	got := FailAll([]string{"a", "b"}, "device is offline")
	assert.Equal(t, []Result{
		{Status: ResultFailure, Error: "device is offline", CallID: "a"},
		{Status: ResultFailure, Error: "device is offline", CallID: "b"},
	}, got)
	assert.Empty(t, FailAll(nil, "x"))
}

func TestMatchResultsOrdersByCallIDAndFailsWhatIsMissing(t *testing.T) {
	actions := []Command{{ToolName: "x", CallID: "1"}, {ToolName: "y", CallID: "2"}, {ToolName: "z", CallID: "3"}}
	got := MatchResults(actions, []Result{
		{Status: ResultSuccess, CallID: "3"},
		{Status: ResultSuccess, CallID: "stray"},
		{Status: ResultSuccess, CallID: "1"},
	})
	assert.Equal(t, []string{"1", "2", "3"}, ResultCallIDs(got))
	assert.Equal(t, ResultSuccess, got[0].Status)
	assert.Equal(t, Result{Status: ResultFailure, Error: ErrNoResult, CallID: "2"}, got[1])
	assert.Equal(t, ResultSuccess, got[2].Status)
	assert.Equal(t, "1,2,3", JoinCallIDs(CallIDs(actions)))
}
