package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDeployRefusesWhatCouldNotReachTheDevice(t *testing.T) {
	c := newTestServer(t).api
	ctx := context.Background()
	_, err := c.Enroll(ctx, api.EnrollRequest{ID: "kiosk-1"})
	require.NoError(t, err)
	status := func(err error) int {
		var se *api.StatusError
		require.ErrorAs(t, err, &se)
		return se.Code
	}

	_, err = c.DeployTool(ctx, "nobody", []byte("\x00asm"), "", time.Second)
	assert.Equal(t, http.StatusNotFound, status(err))

	_, err = c.DeployTool(ctx, "kiosk-1", bytes.Repeat([]byte{0}, protocol.MaxModuleBytes+1), "", time.Second)
	assert.Equal(t, http.StatusRequestEntityTooLarge, status(err))

	// Random bytes do not compress: 4 MiB of them exceed one frame.
	noise := make([]byte, 4<<20)
	rand.Read(noise)
	_, err = c.DeployTool(ctx, "kiosk-1", noise, "", time.Second)
	assert.Equal(t, http.StatusRequestEntityTooLarge, status(err))

	err = c.Do(ctx, http.MethodPost, "/api/devices/kiosk-1/tools?timeout=soon", nil, nil)
	assert.Equal(t, http.StatusBadRequest, status(err))
	// A plan step's cap: agents forget commands older than that.
	err = c.Do(ctx, http.MethodPost, "/api/devices/kiosk-1/tools?timeout=25h", nil, nil)
	assert.Equal(t, http.StatusBadRequest, status(err))
	assert.ErrorContains(t, err, `query "timeout": "25h" is more than 24h0m0s, the longest a command may take`)

	resp, err := c.DeployTool(ctx, "kiosk-1", []byte("\x00asm\x01\x00\x00\x00"), "", time.Second)
	require.NoError(t, err)
	require.Len(t, resp.Results, 1)
	assert.Contains(t, resp.Results[0].Error, `device "kiosk-1" is offline`)
}
