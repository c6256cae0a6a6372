package mcpgateway

import (
	"context"
	"testing"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/stretchr/testify/assert"
)

// A task's events read as progress messages: where, which step, what.
func TestEventTextSaysWhereAndWhichStep(t *testing.T) {
	step := 1
	assert.Equal(t, "kiosk-1 step 2/3: echo sent", eventText(api.TaskEvent{Type: api.EventStepStart, DeviceID: "kiosk-1", Step: &step, Steps: 3, Tool: "echo"}))
	assert.Equal(t, "kiosk-1: echo failed boom", eventText(api.TaskEvent{Type: api.EventStepEnd, DeviceID: "kiosk-1", Tool: "echo", Status: "failed", Error: "boom"}))
}

// A request the client cancelled is told from one the server ended, whose
// cause says why.
func TestCancelReasonTellsTheClientFromTheServer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	why, byServer := cancelReason(ctx)
	assert.False(t, byServer)
	assert.Equal(t, "the MCP client cancelled the call", why)

	ctx, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(tasks.ErrShuttingDown)
	why, byServer = cancelReason(ctx)
	assert.True(t, byServer)
	assert.Equal(t, tasks.ErrShuttingDown.Error(), why)
}
