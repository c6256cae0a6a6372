package outboxtest

import (
	"github.com/edgeaip/edgeaip/agent/internal/outbox"
	"github.com/edgeaip/edgeaip/protocol"
)

// Command is a command of session "s-ID" with two calls, ID-c1 and ID-c2,
// as the outbox keeps it when it runs.
func Command(id string) outbox.Accepted {
	return outbox.Accepted{ResponseID: id, SessionID: "s-" + id, Status: protocol.StatusContinue, CallIDs: []string{id + "-c1", id + "-c2"}}
}

// Results are the results of Command(id), request_id "req-ID": the first
// call a success with payload, the second skipped.
func Results(id, payload string) *protocol.ClientMessage {
	return &protocol.ClientMessage{
		Type: protocol.ClientCommandResults, Status: protocol.StatusContinue, ClientID: "dev-1", SessionID: "s-" + id,
		RequestID: "req-" + id, PrevResponseID: id, ActionResults: []protocol.Result{
			{Status: protocol.ResultSuccess, CallID: id + "-c1", Result: map[string]any{"payload": payload}},
			{Status: protocol.ResultSkipped, CallID: id + "-c2", Error: "skipped due to previous failure"},
		},
	}
}
