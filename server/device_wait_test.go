package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// holdWriter blocks the store's writer until the returned release is
// called: every write queued meanwhile waits, as behind a slow fsync.
func (ts *testServer) holdWriter() (release func()) {
	ts.t.Helper()
	held, done := make(chan struct{}), make(chan struct{})
	go ts.srv.store.Write(context.Background(), func(*store.Tx) error {
		close(held)
		<-done
		return nil
	})
	<-held
	return sync.OnceFunc(func() { close(done) })
}

// waitStepStarted waits until a live session has started an attempt: its
// command is built and on its way to the store.
func (ts *testServer) waitStepStarted() {
	ts.t.Helper()
	started := func() bool {
		for _, id := range ts.srv.sessions.LiveIDs() {
			log := ts.srv.tasks.Events(id)
			if log == nil {
				continue
			}
			events, _, _ := log.Since(0)
			for _, e := range events {
				if e.Type == api.EventStepStart {
					return true
				}
			}
		}
		return false
	}
	require.Eventually(ts.t, started, 10*time.Second, time.Millisecond, "no command started")
}

// A command is decided on once it is recorded: whether it goes to its
// device now, waits for it, or fails at once. Here the device's link
// drops while the command is being recorded (the store's writer is held,
// as a slow fsync would), after the command's attempt saw the device
// online. The device is then between links, in its grace, so the command
// must wait for it and be delivered when it comes back, not fail as
// "offline".
func TestALinkThatDropsWhileACommandIsRecordedMakesItWaitForTheDevice(t *testing.T) {
	ts := newTestServer(t)
	token := ts.enroll("kiosk-1")
	dev := ts.mustDial(token)
	dev.register("kiosk-1")

	release := ts.holdWriter()
	defer release()
	done := make(chan api.CommandResponse, 1)
	go func() {
		resp, err := ts.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "1m"})
		assert.NoError(t, err)
		done <- resp
	}()
	ts.waitStepStarted()
	dev.conn.CloseNow()
	ts.waitOffline()
	ts.waitLog("device disconnected")
	release()

	again := ts.mustDial(token)
	again.register("kiosk-1")
	sent := make(chan protocol.ServerMessage, 1)
	go func() {
		if m, err := again.read(); err == nil {
			sent <- m
		}
	}()
	select {
	case resp := <-done:
		t.Fatalf("the command ended while its device was between links: %s", resp.FirstError())
	case cmd := <-sent:
		require.Equal(t, protocol.ServerCommand, cmd.Type, "message: %+v", cmd)
		again.answer(cmd, protocol.ResultSuccess, "")
	}
	resp := <-done
	require.True(t, resp.Succeeded(), resp.FirstError())
}

// A device whose agent stops on purpose closes its link with 1001, going
// away. It is not between links: a command for it fails at once, "device
// shut down", rather than wait out the grace, as does one it was sent and
// had not answered; results it sent before closing stand. A caller that
// asked to wait for it waits, within its timeout, and its command goes
// out when the device registers again.
func TestADeviceThatShutDownFailsItsCommandsAtOnceUnlessAskedToWait(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Sessions.DeviceGrace = time.Hour })
	token := ts.enroll("kiosk-1")
	dev := ts.mustDial(token)
	dev.register("kiosk-1")

	answered := make(chan api.CommandResponse, 1)
	unanswered := make(chan api.CommandResponse, 1)
	go func() {
		answered <- ts.command("kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "1m"})
	}()
	first := dev.nextCommand()
	go func() {
		unanswered <- ts.command("kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "1m"})
	}()
	dev.nextCommand()
	// The first one's results, then the close, as a stopping agent sends
	// them: the results are recorded before the close is acted on.
	dev.answer(first, protocol.ResultSuccess, "r1")
	require.NoError(t, dev.conn.Close(websocket.StatusGoingAway, "agent shutting down"))
	ts.waitLog("device shut down")

	resp := <-answered
	assert.True(t, resp.Succeeded(), resp.FirstError())
	resp = <-unanswered
	assert.Equal(t, `device "kiosk-1" shut down before it answered (its agent stopped); to wait for it to come back, `+
		`send the command with wait_for_device (aipctl exec --wait-for-device)`, resp.FirstError())

	start := time.Now()
	resp = ts.command("kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "1m"})
	assert.Less(t, time.Since(start), 10*time.Second, "at once, not after the grace or the timeout")
	assert.Equal(t, `device "kiosk-1" shut down (its agent stopped); to wait for it to come back, `+
		`send the command with wait_for_device (aipctl exec --wait-for-device)`, resp.FirstError())

	waited := make(chan api.CommandResponse, 1)
	go func() {
		waited <- ts.command("kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "1m", WaitForDevice: true})
	}()
	ts.waitLog("the command waits for it to register again")
	again := ts.mustDial(token)
	again.register("kiosk-1")
	again.answer(again.nextCommand(), protocol.ResultSuccess, "r3")
	resp = <-waited
	assert.True(t, resp.Succeeded(), resp.FirstError())

	// Back, its link drops without a close: that is no shutdown, and a
	// command waits for it within the grace, as before.
	again.conn.CloseNow()
	ts.waitOffline()
	ts.waitLog("device disconnected")
	dropped := make(chan api.CommandResponse, 1)
	go func() {
		dropped <- ts.command("kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "1m"})
	}()
	third := ts.mustDial(token)
	third.register("kiosk-1")
	third.answer(third.nextCommand(), protocol.ResultSuccess, "r4")
	resp = <-dropped
	assert.True(t, resp.Succeeded(), resp.FirstError())
}

// command runs req on device id and returns its response.
func (ts *testServer) command(id string, req api.CommandRequest) api.CommandResponse {
	resp, err := ts.api.Command(context.Background(), id, req)
	assert.NoError(ts.t, err)
	return resp
}
