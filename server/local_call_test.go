package server

import (
	"context"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A device reports a local call until the server acknowledges it: each
// report is acknowledged, and the call is in the audit log once.
func TestALocalCallIsAuditedOnceHoweverOftenItIsReported(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	report := protocol.ClientMessage{Type: protocol.ClientLocalCall, ClientID: "kiosk-1", PrevResponseID: "local-1",
		Actions:       []protocol.Command{{ToolName: "echo", ToolType: protocol.ToolAction, CallID: "local-1", Parameters: map[string]any{"say": "hi"}}},
		ActionResults: []protocol.Result{{Status: protocol.ResultFailure, Error: "out of fuel", CallID: "local-1", Namespace: "stock"}},
		Metadata:      map[string]any{"caller": "kiosk-assistant/1.0"}}
	for _, rid := range []string{"q-1", "q-2"} {
		report.RequestID = rid
		dev.send(report)
		ack := dev.recvType(protocol.ServerHeartbeat)
		assert.Equal(t, rid, ack.ResponseID)
	}
	entries, err := ts.api.Audit(context.Background(), api.AuditQuery{Device: "kiosk-1"})
	require.NoError(t, err)
	var local []api.AuditEntry
	for _, e := range entries {
		if e.Action == "" {
			local = append(local, e)
		}
	}
	require.Len(t, local, 1, "the enrollment, and the call once")
	e := local[0]
	assert.Equal(t, api.ActorLocal, e.Actor)
	assert.Equal(t, "kiosk-assistant/1.0", e.Identity)
	assert.Equal(t, "action::echo", e.Tool)
	assert.Equal(t, "stock", e.Namespace)
	assert.Equal(t, "local-1", e.CallID)
	assert.Equal(t, protocol.ResultFailure, e.Outcome)
	assert.Equal(t, "out of fuel", e.Error)
	assert.JSONEq(t, `{"say":"hi"}`, string(e.Parameters))
}
