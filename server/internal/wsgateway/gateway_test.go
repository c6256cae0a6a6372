package wsgateway

import (
	"log/slog"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestADeviceRegistersOnlyAsItself(t *testing.T) {
	dev := &store.Device{ID: "kiosk-1"}
	for name, m := range map[string]protocol.ClientMessage{
		"a constellation":   {ClientType: protocol.ClientConstellation, ClientID: "kiosk-1"},
		"another device":    {ClientType: protocol.ClientDevice, ClientID: "kiosk-2"},
		"targeting another": {ClientType: protocol.ClientDevice, ClientID: "kiosk-1", TargetID: "kiosk-2"},
	} {
		_, err := registerDevice(dev, &m, slog.Default())
		assert.Error(t, err, name)
	}
	c, err := registerDevice(dev, &protocol.ClientMessage{ClientType: protocol.ClientDevice, ClientID: "kiosk-1",
		Metadata: map[string]any{protocol.MetadataSystemInfo: map[string]any{"hostname": "kiosk"}}}, slog.Default())
	require.NoError(t, err)
	assert.True(t, c.IsDevice())
	require.NotNil(t, c.Info.Load())
	assert.Equal(t, "kiosk", c.Info.Load().Hostname)
}

func TestUnreadableSystemInfoRegistersWithoutInventory(t *testing.T) {
	assert.Nil(t, systemInfoOf(map[string]any{}, slog.Default()), "none sent")
	assert.Nil(t, systemInfoOf(map[string]any{protocol.MetadataSystemInfo: "not an object"}, slog.Default()))
	assert.Zero(t, toolCount(nil))
}

func TestAMessageMayNotClaimAnotherClient(t *testing.T) {
	dev := &dispatch.Link{ID: "kiosk-1", Type: protocol.ClientDevice}
	con := &dispatch.Link{ID: "orch-1", Type: protocol.ClientConstellation, Target: "kiosk-1"}
	for name, tc := range map[string]struct {
		c  *dispatch.Link
		m  protocol.ClientMessage
		ok bool
	}{
		"device, its own":            {dev, protocol.ClientMessage{ClientID: "kiosk-1", TargetID: "kiosk-1"}, true},
		"device, another's id":       {dev, protocol.ClientMessage{ClientID: "kiosk-2"}, false},
		"device, as a constellation": {dev, protocol.ClientMessage{ClientType: protocol.ClientConstellation}, false},
		"device, another target":     {dev, protocol.ClientMessage{TargetID: "kiosk-2"}, false},
		"constellation, its target":  {con, protocol.ClientMessage{TargetID: "kiosk-1"}, true},
		"constellation, another":     {con, protocol.ClientMessage{TargetID: "kiosk-2"}, false},
	} {
		err := checkIdentity(tc.c, &tc.m)
		assert.Equal(t, tc.ok, err == nil, "%s: %v", name, err)
	}
}

func TestAnAckAnswersItsRequestOrAFreshID(t *testing.T) {
	ack := registrationAck(&protocol.ClientMessage{RequestID: "r-1"})
	assert.Equal(t, protocol.ServerHeartbeat, ack.Type)
	assert.Equal(t, protocol.StatusOK, ack.Status)
	assert.Equal(t, "r-1", ack.ResponseID)
	assert.NotEmpty(t, ackID(&protocol.ClientMessage{}), "UFO's REGISTER and TASK carry no request_id")
}
