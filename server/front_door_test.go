package server

import (
	"testing"

	"github.com/edgeaip/edgeaip/internal/encodecount"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/plan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A fleet's plan is encoded as JSON once, when it is admitted: the fleet's
// task and each device's keep those bytes. What is encoded after that is
// each device's command, for its record. (The audit entry of a command
// that fails unsent encodes its record as read back, not the plan's
// values.)
func TestAFleetsPlanIsEncodedOnceForItAndItsDevices(t *testing.T) {
	ts := newTestServer(t)
	labels := map[string]string{"site": "lobby"}
	for _, id := range []string{"a", "b", "c"} {
		_, err := ts.api.Enroll(t.Context(), api.EnrollRequest{ID: id, Labels: labels})
		require.NoError(t, err)
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
	require.Equal(t, api.StateFailed, task.State, "the devices are offline")
	assert.EqualValues(t, 2+3, counted.JSON(),
		"admission: the plan, and its step's parameters; then each device's command, for its record")
}
