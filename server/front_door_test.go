package server

import (
	"testing"

	"github.com/edgeaip/edgeaip/internal/encodecount"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/plan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A fleet's plan is encoded once in each format for it and all its
// devices: as JSON when it is admitted, which the fleet's task, each
// device's command record and audit entry keep; as CBOR for the frame
// that admission measures and every device is sent.
func TestAFleetsPlanIsEncodedOncePerFormatForItAndItsDevices(t *testing.T) {
	ts := newTestServer(t)
	labels := map[string]string{"site": "lobby"}
	for _, id := range []string{"a", "b", "c"} {
		resp, err := ts.api.Enroll(t.Context(), api.EnrollRequest{ID: id, Labels: labels})
		require.NoError(t, err)
		dev := ts.mustDial(resp.Token)
		dev.register(id)
		dev.serveOK()
	}
	counted := encodecount.New()
	p := &plan.Plan{Steps: []plan.Step{{Action: plan.Action{ToolName: "echo", ToolType: protocol.ToolAction,
		Parameters: plan.Parameters{"v": counted}}}}}
	selector, devices, err := ts.srv.tasks.FleetTargets(t.Context(), testAdmin, labels)
	require.NoError(t, err)

	fleet, err := ts.srv.tasks.StartFleet(t.Context(), tasks.FleetTask{Asker: tasks.Asker{Who: testAdmin, Kind: api.RequesterOperator},
		Plan: p, Labels: labels, Selector: selector, Devices: devices, Concurrency: 3})
	require.NoError(t, err)
	<-fleet.Done()

	task := ts.waitTask(fleet.ID)
	require.Equal(t, api.StateCompleted, task.State)
	for _, id := range devices {
		entries, err := ts.srv.store.Audit().List(t.Context(), store.AuditFilter{DeviceID: id, Limit: 10})
		require.NoError(t, err)
		require.Len(t, entries, 2, "its enrollment, and its command")
		assert.JSONEq(t, `{"v":"x"}`, string(entries[1].Parameters))
	}
	assert.EqualValues(t, 1, counted.JSON(), "the plan, each device's record and audit entry share one encoding")
	assert.EqualValues(t, 1, counted.CBOR(), "admission and the three devices' frames share one encoding")
}

// A command's parameters are encoded once in each format from its
// admission to its audit entry: JSON for admission's checks, the
// command's record and its audit entry; CBOR for the frame admission
// measures and the one the device is sent.
func TestACommandsParametersAreEncodedOncePerFormat(t *testing.T) {
	ts := newTestServer(t)
	ts.device("kiosk-1").serveOK()
	counted := encodecount.New()

	resp, err := ts.srv.tasks.RunCommand(t.Context(), tasks.CommandTask{Asker: tasks.Asker{Who: testAdmin, Kind: api.RequesterOperator},
		Device: "kiosk-1", Actions: []protocol.Command{{ToolName: "echo", Parameters: map[string]any{"v": counted}}}})
	require.NoError(t, err)
	require.True(t, resp.Succeeded(), resp.FirstError())

	entries, err := ts.srv.store.Audit().List(t.Context(), store.AuditFilter{SessionID: resp.SessionID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.JSONEq(t, `{"v":"x"}`, string(entries[0].Parameters), "the audit entry keeps the parameters")
	assert.EqualValues(t, 1, counted.JSON(), "admission, the record and the audit entry share one encoding")
	assert.EqualValues(t, 1, counted.CBOR(), "admission and the wire share one encoding")
}
