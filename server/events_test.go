package server

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAnIdleEventStreamGetsKeepaliveCommentsThatClientsIgnore(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.EventsKeepalive = 10 * time.Millisecond })
	dev := ts.device("kiosk-1")
	d := dispatchPlan(t, ts, "kiosk-1", echoPlan)
	cmd := dev.nextCommand()

	followed := make(chan []string, 1)
	go func() {
		var types []string
		err := ts.api.Events(t.Context(), d.SessionID, func(e api.TaskEvent) error {
			types = append(types, e.Type)
			return nil
		})
		assert.NoError(t, err)
		followed <- types
	}()

	// The deadline only stops a stream without comments from hanging the test.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", ts.http.URL+"/api/tasks/"+d.SessionID+"/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+ts.api.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	for sc.Scan() && !slices.Contains(lines, ": keepalive") {
		lines = append(lines, sc.Text())
	}
	require.Greater(t, len(lines), 2, "%q", lines)
	assert.Equal(t, []string{"id: 1", "event: step_start"}, lines[:2], "the events first")
	assert.Equal(t, ": keepalive", lines[len(lines)-1], "then, while the step runs, comments")

	dev.answer(cmd, protocol.ResultSuccess, "")
	assert.Equal(t, []string{api.EventStepStart, api.EventStepEnd, api.EventEnd}, <-followed)
}
