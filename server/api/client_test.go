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
	c := &Client{BaseURL: silentServer(t), ReplyTimeout: 100 * time.Millisecond, PreparationWait: 50 * time.Millisecond, EventsRetryWait: 1}

	_, err := c.Devices(t.Context())
	require.ErrorIs(t, err, ErrUnreachable)
	assert.ErrorContains(t, err, "GET /api/devices: no reply within 100ms")

	start := time.Now()
	_, err = c.Command(t.Context(), "kiosk-1", CommandRequest{Timeout: "200ms"})
	require.ErrorIs(t, err, ErrUnreachable)
	assert.ErrorContains(t, err, "no reply within 350ms (the 250ms the call asks the server to wait, and 100ms more)")
	assert.GreaterOrEqual(t, time.Since(start), 350*time.Millisecond, "a command gets its own timeout, and the preparation the server may add, first")

	_, err = c.DeployTool(t.Context(), "kiosk-1", []byte("\x00asm"), "", 50*time.Millisecond)
	assert.ErrorContains(t, err, "no reply within 200ms")

	err = c.Events(t.Context(), "t1", func(TaskEvent) error { return nil })
	require.ErrorIs(t, err, ErrUnreachable)
	assert.ErrorContains(t, err, "GET /api/tasks/t1/events: no reply within 100ms")
}

// A call that asks the server to wait for a tool gives up once the
// server answers nothing, its health checks neither, for ServerSilence,
// not after the command's timeout and the preparation bound.
func TestACommandGivesUpOnAServerThatStopsAnswering(t *testing.T) {
	c := &Client{BaseURL: silentServer(t), PreparationWait: time.Hour, ServerSilence: 150 * time.Millisecond}
	_, err := c.Command(t.Context(), "kiosk-1", CommandRequest{Timeout: "1h"})
	require.ErrorIs(t, err, ErrUnreachable)
	require.ErrorIs(t, err, ErrServerSilent)
	assert.ErrorContains(t, err, "POST /api/devices/kiosk-1/commands: server stopped answering: it answered neither the call nor GET /api/health for 150ms")
}

// A server that answers its health is waited for, however long the
// command takes: here it answers the command only after its health was
// asked, and answered, more often than ServerSilence has room for.
func TestACommandWaitsForAServerThatAnswersItsHealth(t *testing.T) {
	checks := make(chan struct{}, 64)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/health" {
			w.Write([]byte(`{"status":"healthy"}`))
			checks <- struct{}{}
			return
		}
		for range 6 { // two ServerSilences' worth of checks, every third of one
			<-checks
		}
		w.Write([]byte(`{"status":"success"}`))
	}))
	t.Cleanup(hs.Close)
	c := &Client{BaseURL: hs.URL, ServerSilence: 150 * time.Millisecond}
	resp, err := c.Command(t.Context(), "kiosk-1", CommandRequest{})
	require.NoError(t, err)
	assert.True(t, resp.Succeeded())
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

// Every call that starts a task goes with an Idempotency-Key: the
// request's, or a fresh one per call.
func TestCallsThatStartATaskSendAnIdempotencyKey(t *testing.T) {
	keys := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys <- r.Header.Get(IdempotencyKeyHeader)
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL}
	ctx := t.Context()
	calls := map[string]func(key string) error{
		"command": func(key string) error {
			_, err := c.Command(ctx, "kiosk-1", CommandRequest{IdempotencyKey: key})
			return err
		},
		"dispatch": func(key string) error {
			_, err := c.Dispatch(ctx, DispatchRequest{IdempotencyKey: key})
			return err
		},
		"fleet": func(key string) error {
			_, err := c.Fleet(ctx, FleetRequest{IdempotencyKey: key})
			return err
		},
	}
	for name, call := range calls {
		require.NoError(t, call("mine"))
		assert.Equal(t, "mine", <-keys, name)
		require.NoError(t, call(""))
		fresh := <-keys
		require.NoError(t, call(""))
		assert.Len(t, fresh, 26, "%s: 128 random bits in base32", name)
		assert.NotEqual(t, fresh, <-keys, "%s: a fresh key per call", name)
	}
	_, err := c.Devices(ctx)
	require.Error(t, err) // {} is not a list; the header is what matters
	assert.Empty(t, <-keys, "a call that starts nothing sends none")
}
