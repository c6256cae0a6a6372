package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cuttingStream serves a task's events as a proxy that cuts every
// connection would let them through: each connection gets at most perConn
// events after Last-Event-ID, then closes. After the last of total events
// comes the end.
func cuttingStream(t *testing.T, total, perConn int, conns *atomic.Int32) *httptest.Server {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conns.Add(1)
		last, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
		w.Header().Set("Content-Type", "text/event-stream")
		for id := last + 1; id <= min(last+perConn, total); id++ {
			typ := EventStepEnd
			if id == total {
				typ = EventEnd
			}
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: {\"type\":%q}\n\n", id, typ, typ)
		}
	}))
	t.Cleanup(hs.Close)
	return hs
}

func TestEventsFollowsAStreamCutOftenWhileItMakesProgress(t *testing.T) {
	var conns atomic.Int32
	hs := cuttingStream(t, 3*maxEventFailures, 1, &conns)
	c := &Client{BaseURL: hs.URL, EventsRetryWait: 1}
	n := 0
	require.NoError(t, c.Events(t.Context(), "t1", func(TaskEvent) error { n++; return nil }))
	assert.Equal(t, 3*maxEventFailures, n, "every event, once")
	assert.EqualValues(t, 3*maxEventFailures, conns.Load())
}

func TestEventsGivesUpAfterConsecutiveFailures(t *testing.T) {
	var conns atomic.Int32
	hs := cuttingStream(t, 10, 0, &conns)
	c := &Client{BaseURL: hs.URL, EventsRetryWait: 1}
	err := c.Events(context.Background(), "t1", func(TaskEvent) error { return nil })
	require.ErrorIs(t, err, ErrUnreachable)
	assert.ErrorIs(t, err, errStreamEnded)
	assert.EqualValues(t, maxEventFailures, conns.Load())
}
