package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/eventlog"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
)

// serveEvents is GET /api/tasks/{id}/events: Server-Sent Events for each
// step's start and results, then the end. A task that runs here, or ended
// here lately enough that the front door keeps its event log
// (tasks.FrontDoor.Events), is streamed from that log; any other, one
// that runs on another node of a cluster or ended earlier, from the
// store, which is read again every tasks.StoredEventsPoll until it ends
// (see storedLog). Each event's id is its number in the task's stream,
// so a client that reconnects with Last-Event-ID, to this node or
// another, gets only the events after it. The stream ends when the
// caller's identity or token is revoked. A caller with tool patterns sees
// each event as inscope.Sight shows it.
func (h *taskHandlers) serveEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming is not supported by this connection")
		return
	}
	n, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
	n = max(n, 0)
	var log eventSource = h.tasks.Events(id)
	if log == (*eventlog.Log)(nil) {
		stored := &storedLog{tasks: h.tasks, log: h.log, ctx: r.Context(), id: id}
		if err := stored.read(); errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no task %q", id))
			return
		} else if err != nil {
			writeError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		log = stored
	}
	sight, err := h.inScope.TaskSight(r.Context(), identity.CallerFrom(r), id)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no task %q", id))
		return
	} else if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	revoked, stop := h.auth.Watch(identity.CallerFrom(r))
	defer stop()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	keepalive := time.NewTicker(h.keepalive)
	defer keepalive.Stop()
	for {
		events, ended, more := log.Since(n)
		for _, e := range events {
			n++
			b, _ := json.Marshal(sight.Event(e))
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", n, e.Type, b); err != nil {
				return
			}
		}
		flusher.Flush()
		if ended {
			return
		}
		if !waitForEvents(w, flusher, more, keepalive.C, r.Context().Done(), revoked) {
			return
		}
	}
}

// eventSource is a task's events: Since(n) returns those after the first
// n, whether there will be no more, and a channel closed when there may
// be more.
type eventSource interface {
	Since(n int) ([]api.TaskEvent, bool, <-chan struct{})
}

// storedLog is the events of a task that does not run here, read from the
// store: at first, then at each call of Since, tasks.StoredEventsPoll
// after the one before.
type storedLog struct {
	tasks *tasks.FrontDoor
	log   *slog.Logger
	ctx   context.Context
	id    string

	events []api.TaskEvent
	ended  bool
	fresh  bool  // read since the last call of Since
	failed error // the last read's; the stream then ends, for the client to resume
}

func (l *storedLog) read() error {
	l.events, l.ended, l.failed = l.tasks.StoredEvents(l.ctx, l.id)
	l.fresh = true
	return l.failed
}

func (l *storedLog) Since(n int) ([]api.TaskEvent, bool, <-chan struct{}) {
	if !l.fresh && l.read() != nil {
		l.log.Warn("task events not read from the store; ending the stream", "session_id", l.id, "err", l.failed)
	}
	l.fresh = false
	if l.failed != nil {
		return nil, true, nil
	}
	more := make(chan struct{})
	time.AfterFunc(tasks.StoredEventsPoll, func() { close(more) })
	if n >= len(l.events) {
		return nil, l.ended, more
	}
	return l.events[n:], l.ended, more
}

// waitForEvents waits for more, writing a comment line, which clients
// ignore, at each keepalive tick. It reports false if the client left or
// was revoked.
func waitForEvents(w io.Writer, flusher http.Flusher, more <-chan struct{}, keepalive <-chan time.Time, gone, revoked <-chan struct{}) bool {
	for {
		select {
		case <-more:
			return true
		case <-gone:
			return false
		case <-revoked:
			return false
		case <-keepalive:
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
				return false
			}
			flusher.Flush()
		}
	}
}
