package api

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// silentServer accepts connections and never answers on them, as a hung
// server or a proxy with no backend does.
func silentServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	conns := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	t.Cleanup(func() {
		l.Close()
		for len(conns) > 0 {
			(<-conns).Close()
		}
	})
	return "http://" + l.Addr().String()
}

func TestCallsGiveUpOnAServerThatNeverReplies(t *testing.T) {
	c := &Client{BaseURL: silentServer(t), ReplyTimeout: 100 * time.Millisecond, EventsRetryWait: 1}

	_, err := c.Devices(t.Context())
	require.ErrorIs(t, err, ErrUnreachable)
	assert.ErrorContains(t, err, "GET /api/devices: no reply within 100ms")

	start := time.Now()
	_, err = c.Command(t.Context(), "kiosk-1", CommandRequest{Timeout: "200ms"})
	require.ErrorIs(t, err, ErrUnreachable)
	assert.ErrorContains(t, err, "no reply within 300ms (the 200ms the call asks the server to wait, and 100ms more)")
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "a command gets its own timeout first")

	_, err = c.DeployTool(t.Context(), "kiosk-1", []byte("\x00asm"), "", 50*time.Millisecond)
	assert.ErrorContains(t, err, "no reply within 150ms")

	err = c.Events(t.Context(), "t1", func(TaskEvent) error { return nil })
	require.ErrorIs(t, err, ErrUnreachable)
	assert.ErrorContains(t, err, "GET /api/tasks/t1/events: no reply within 100ms")
}

func TestEventsTakesASilentStreamAsBroken(t *testing.T) {
	var conns atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conns.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(hs.Close)
	c := &Client{BaseURL: hs.URL, EventsIdleTimeout: 50 * time.Millisecond, EventsRetryWait: 1}
	err := c.Events(t.Context(), "t1", func(TaskEvent) error { return nil })
	require.ErrorIs(t, err, ErrUnreachable)
	assert.ErrorContains(t, err, "the stream brought nothing for 50ms, not even a keepalive")
	assert.EqualValues(t, maxEventFailures, conns.Load(), "each silent stream counts as a break")
}
