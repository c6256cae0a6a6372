package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// POST /api/admission is the dry run of a dispatch, a fleet or a command:
// admission's verdict, every problem at once, and which devices were
// checked against a registration that may be stale. Nothing runs.
func TestTheDryRunGivesAdmissionsVerdictAndRunsNothing(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.labelled("kiosk-1", lobby)
	dev.register("kiosk-1", inventoryWithSchemas()...)
	resp, err := ts.api.Enroll(context.Background(), api.EnrollRequest{ID: "kiosk-2", Labels: lobby})
	require.NoError(t, err)
	gone := ts.mustDial(resp.Token)
	gone.register("kiosk-2", inventoryWithSchemas()...)
	gone.conn.CloseNow()
	require.Eventually(t, func() bool { return ts.srv.reg.Device("kiosk-2") == nil }, 10*time.Second, 10*time.Millisecond)

	verdict, err := ts.api.Admission(context.Background(), api.AdmissionRequest{Device: "kiosk-1",
		Plan: json.RawMessage(`"steps: [{tool: stock.echo}, {tool: hash_fiel}, {tool: stock.hash_file, parameters: {path: 3}}]"`)})
	require.NoError(t, err)
	assert.False(t, verdict.Admitted)
	assert.Equal(t, []api.Problem{
		{Path: "steps[1].tool", Problem: `device "kiosk-1" has no tool "hash_fiel"; did you mean hash_file?`},
		{Path: "steps[2].parameters.path", Problem: `got number, want string, says the input schema of "stock.hash_file" on device "kiosk-1"`},
	}, verdict.Problems)
	require.Len(t, verdict.Devices, 1)
	assert.True(t, verdict.Devices[0].Online)

	// A fleet: each device, the offline one against its last registration.
	verdict, err = ts.api.Admission(context.Background(), api.AdmissionRequest{Labels: lobby,
		Plan: json.RawMessage(`{"steps": [{"tool": "stock.hash_file", "parameters": {"path": "/x"}}]}`)})
	require.NoError(t, err)
	assert.True(t, verdict.Admitted, "%v", verdict.Problems)
	require.Len(t, verdict.Devices, 2)
	assert.Equal(t, "kiosk-2", verdict.Devices[1].ID)
	assert.False(t, verdict.Devices[1].Online, "checked against its last registration")
	assert.NotNil(t, verdict.Devices[1].LastSeen)

	// A command's actions too.
	verdict, err = ts.api.Admission(context.Background(), api.AdmissionRequest{Device: "kiosk-2",
		Actions: []protocol.Command{{ToolName: "hash_file", Parameters: map[string]any{}}}})
	require.NoError(t, err)
	assert.Equal(t, []api.Problem{{Path: "actions[0].parameters.path",
		Problem: `missing (required), says the input schema of "hash_file" on device "kiosk-2" (offline: as it last registered)`}}, verdict.Problems)

	for _, c := range []struct {
		req  api.AdmissionRequest
		code int
	}{
		{api.AdmissionRequest{Plan: json.RawMessage(`"steps: [{tool: echo}]"`)}, http.StatusBadRequest},
		{api.AdmissionRequest{Device: "kiosk-1", Labels: lobby, Plan: json.RawMessage(`"steps: [{tool: echo}]"`)}, http.StatusBadRequest},
		{api.AdmissionRequest{Device: "kiosk-1"}, http.StatusBadRequest},
		{api.AdmissionRequest{Device: "kiosk-1", Plan: json.RawMessage(`"steps: 3"`)}, http.StatusBadRequest},
		{api.AdmissionRequest{Device: "kiosk-9", Plan: json.RawMessage(`"steps: [{tool: echo}]"`)}, http.StatusNotFound},
		{api.AdmissionRequest{Labels: map[string]string{"site": "moon"}, Plan: json.RawMessage(`"steps: [{tool: echo}]"`)}, http.StatusNotFound},
	} {
		code, body := ts.apiStatus("POST", "/api/admission", c.req)
		assert.Equal(t, c.code, code, "%+v: %s", c.req, body)
	}
	ts.requireNothingRecorded(dev)
}
