package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// eventLog is a session's events, kept while it runs so that a subscriber
// who comes late still sees them all.
type eventLog struct {
	deviceID string // stamped on events that name no device
	// tee, if set, is also given each event: a fleet follows its
	// children's. Never changed after newEventLog.
	tee func(api.TaskEvent)

	mu     sync.Mutex
	events []api.TaskEvent
	ended  bool
	// changed is closed at the next event, and made only when someone
	// waits for one: most sessions' events, a single command's, have no
	// one watching them as they come.
	changed chan struct{}
}

func newEventLog(deviceID string, tee func(api.TaskEvent)) *eventLog {
	return &eventLog{deviceID: deviceID, tee: tee}
}

// add appends e; an EventEnd event is the last.
func (l *eventLog) add(e api.TaskEvent) {
	e.Time = time.Now().UTC()
	if e.DeviceID == "" {
		e.DeviceID = l.deviceID
	}
	if !l.append(e) {
		return
	}
	if l.tee != nil {
		l.tee(e)
	}
}

func (l *eventLog) append(e api.TaskEvent) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return false
	}
	l.events = append(l.events, e)
	l.ended = e.Type == api.EventEnd
	l.tell()
	return true
}

// leave ends the log without an end event: the task goes on on another
// node, which adopted it. A stream of it ends, for its client to resume
// it, with Last-Event-ID, from the store.
func (l *eventLog) leave() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended {
		l.ended = true
		l.tell()
	}
}

// tell wakes those waiting for the next event. l.mu is held.
func (l *eventLog) tell() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// since returns the events after the first n, whether the log has ended,
// and a channel closed when there is more.
func (l *eventLog) since(n int) ([]api.TaskEvent, bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	if n > len(l.events) {
		return nil, l.ended, l.changed
	}
	return l.events[n:], l.ended, l.changed
}

// recentLogs keeps the event logs of ended sessions for recentLogsTTL, so
// that a client that subscribes just after a task ended, as one that
// dispatched a quick task does, still sees every event. It is guarded by
// the session manager's mutex.
type recentLogs struct {
	logs  map[string]*eventLog
	order []recentLog // oldest first
}

type recentLog struct {
	id    string
	ended time.Time
}

// Bounds of recentLogs: an event log holds a task's results, so memory is
// bounded by count as well as by age.
const (
	recentLogsTTL = 10 * time.Minute
	recentLogsMax = 1000
)

func (r *recentLogs) keep(id string, l *eventLog, now time.Time) {
	if l == nil {
		return
	}
	if r.logs == nil {
		r.logs = map[string]*eventLog{}
	}
	r.prune(now)
	if len(r.order) == recentLogsMax {
		delete(r.logs, r.order[0].id)
		r.order = r.order[1:]
	}
	r.logs[id] = l
	r.order = append(r.order, recentLog{id: id, ended: now})
}

func (r *recentLogs) get(id string, now time.Time) *eventLog {
	r.prune(now)
	return r.logs[id]
}

func (r *recentLogs) prune(now time.Time) {
	n := 0
	for n < len(r.order) && now.Sub(r.order[n].ended) > recentLogsTTL {
		delete(r.logs, r.order[n].id)
		n++
	}
	r.order = r.order[n:]
}

// serveEvents is GET /api/tasks/{id}/events: Server-Sent Events for each
// step's start and results, then the end. A task that runs here, or ended
// here within recentLogsTTL, is streamed from its event log; any other,
// one that runs on another node of a cluster or ended earlier, from the
// store, which is read again every storedEventsPoll until it ends (see
// storedEvents). Each event's id is its number in the task's stream, so
// a client that reconnects with Last-Event-ID, to this node or another,
// gets only the events after it. The stream ends when the caller's
// identity or token is revoked.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming is not supported by this connection")
		return
	}
	n, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
	n = max(n, 0)
	var log eventSource = s.tasks.Events(id)
	if log == (*eventLog)(nil) {
		stored := &storedLog{s: s, ctx: r.Context(), id: id}
		if err := stored.read(); errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no task %q", id))
			return
		} else if err != nil {
			writeError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		log = stored
	}
	revoked, stop := s.auth.Watch(identity.CallerFrom(r))
	defer stop()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	keepalive := time.NewTicker(s.cfg.EventsKeepalive)
	defer keepalive.Stop()
	for {
		events, ended, more := log.since(n)
		for _, e := range events {
			n++
			b, _ := json.Marshal(e)
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

// eventSource is a task's events: since(n) returns those after the first
// n, whether there will be no more, and a channel closed when there may
// be more.
type eventSource interface {
	since(n int) ([]api.TaskEvent, bool, <-chan struct{})
}

// storedLog is the events of a task that does not run here, read from the
// store: at first, then at each call of since, storedEventsPoll after the
// one before.
type storedLog struct {
	s   *Server
	ctx context.Context
	id  string

	events []api.TaskEvent
	ended  bool
	fresh  bool  // read since the last call of since
	failed error // the last read's; the stream then ends, for the client to resume
}

func (l *storedLog) read() error {
	l.events, l.ended, l.failed = l.s.readStoredEvents(l.ctx, l.id)
	l.fresh = true
	return l.failed
}

func (l *storedLog) since(n int) ([]api.TaskEvent, bool, <-chan struct{}) {
	if !l.fresh && l.read() != nil {
		l.s.log.Warn("task events not read from the store; ending the stream", "session_id", l.id, "err", l.failed)
	}
	l.fresh = false
	if l.failed != nil {
		return nil, true, nil
	}
	more := make(chan struct{})
	time.AfterFunc(storedEventsPoll, func() { close(more) })
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
