package server

import (
	"context"
	"sync"
	"testing"
	"time"

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
		m := ts.srv.sessions
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, s := range m.live {
			events, _, _ := s.events.since(0)
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
