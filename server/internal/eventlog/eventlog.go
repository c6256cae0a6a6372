// Package eventlog keeps a task's events while it runs, so that a
// subscriber who comes late still sees them all, and those of tasks that
// ended lately, bounded in age and number.
package eventlog

import (
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
)

// Log is a session's events, kept while it runs so that a subscriber
// who comes late still sees them all.
type Log struct {
	deviceID string // stamped on events that name no device
	// tee, if set, is also given each event: a fleet follows its
	// children's. Never changed after New.
	tee func(api.TaskEvent)

	mu     sync.Mutex
	events []api.TaskEvent
	ended  bool
	// changed is closed at the next event, and made only when someone
	// waits for one: most sessions' events, a single command's, have no
	// one watching them as they come.
	changed chan struct{}
}

// New is the event log of a task on deviceID; tee, if set, is also
// given each event.
func New(deviceID string, tee func(api.TaskEvent)) *Log {
	return &Log{deviceID: deviceID, tee: tee}
}

// Add appends e; an EventEnd event is the last.
func (l *Log) Add(e api.TaskEvent) {
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

func (l *Log) append(e api.TaskEvent) bool {
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

// Leave ends the log without an end event: the task goes on on another
// node, which adopted it. A stream of it ends, for its client to resume
// it, with Last-Event-ID, from the store.
func (l *Log) Leave() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended {
		l.ended = true
		l.tell()
	}
}

// tell wakes those waiting for the next event. l.mu is held.
func (l *Log) tell() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// Since returns the events after the first n, whether the log has ended,
// and a channel closed when there is more.
func (l *Log) Since(n int) ([]api.TaskEvent, bool, <-chan struct{}) {
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

// Recent keeps the event logs of ended sessions for recentTTL, so
// that a client that subscribes just after a task ended, as one that
// dispatched a quick task does, still sees every event. It has no lock of
// its own: whoever holds it guards every call (the session manager, with
// its mutex).
type Recent struct {
	logs  map[string]*Log
	order []recentLog // oldest first
}

type recentLog struct {
	id    string
	ended time.Time
}

// Bounds of Recent: an event log holds a task's results, so memory is
// bounded by count as well as by age.
const (
	recentTTL = 10 * time.Minute
	recentMax = 1000
)

func (r *Recent) Keep(id string, l *Log, now time.Time) {
	if l == nil {
		return
	}
	if r.logs == nil {
		r.logs = map[string]*Log{}
	}
	r.prune(now)
	if len(r.order) == recentMax {
		delete(r.logs, r.order[0].id)
		r.order = r.order[1:]
	}
	r.logs[id] = l
	r.order = append(r.order, recentLog{id: id, ended: now})
}

func (r *Recent) Get(id string, now time.Time) *Log {
	r.prune(now)
	return r.logs[id]
}

func (r *Recent) prune(now time.Time) {
	n := 0
	for n < len(r.order) && now.Sub(r.order[n].ended) > recentTTL {
		delete(r.logs, r.order[n].id)
		n++
	}
	r.order = r.order[n:]
}

// Forget drops task id's log.
func (r *Recent) Forget(id string) { delete(r.logs, id) }
