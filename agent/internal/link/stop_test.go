package link

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/agent/internal/logtest"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A server counts a device online once it has read its REGISTER, before
// its ack reaches the agent. An agent stopped in between must still say
// it goes away (1001), or the server gives the device a grace to come
// back and holds its commands for it instead of failing them at once.
func TestALinkStoppedWhileItsRegistrationWaitsForTheAckClosesGoingAway(t *testing.T) {
	registered := make(chan struct{})
	ended := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := protocol.Accept(w, r, protocol.ConnOptions{Logger: logtest.Quiet})
		if err != nil {
			ended <- err
			return
		}
		defer conn.CloseNow()
		var m protocol.ClientMessage
		if err := conn.Read(r.Context(), &m); err != nil {
			ended <- err
			return
		}
		close(registered) // and no ack, as from a server slow to send it
		ended <- conn.Read(context.WithoutCancel(r.Context()), &m)
	}))
	t.Cleanup(srv.Close)
	logs := &logtest.Recorder{}
	stop := runLink(t, "kiosk-1", []string{"ws" + strings.TrimPrefix(srv.URL, "http") + "/ws"}, "",
		openOutbox(t, "kiosk-1", logs.Logger()), logs.Logger(), nil)

	select {
	case <-registered:
	case err := <-ended:
		t.Fatalf("the link ended before it registered: %v", err)
	case <-time.After(testenv.Slowdown * 20 * time.Second):
		t.Fatal("the link never registered")
	}
	stop()
	err := <-ended
	assert.Equal(t, websocket.StatusGoingAway, protocol.CloseStatus(err), "closed with a handshake: %v", err)
	require.False(t, logs.Contains("msg=registered"), "no ack was sent, yet the link says it registered")
}
