package dispatch

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/protocol"
)

// Link is one registered connection: a device agent, or a constellation
// client bound to one target device.
type Link struct {
	ID     string
	Type   protocol.ClientType
	Conn   *protocol.Conn
	Target string // constellations: the device they drive
	// Info is a device's system info, nil if it sent none we could read.
	// A device that registers again on its connection replaces it.
	Info atomic.Pointer[protocol.SystemInfo]
	// SeenAt is, for a device, the last_seen the store holds, unix ns: the
	// time its link was last heard from when last_seen was last written.
	SeenAt atomic.Int64

	// leaseEpoch is, in cluster mode, the epoch of the device's lease
	// this link was registered under.
	leaseEpoch atomic.Int64
}

func (c *Link) IsDevice() bool { return c.Type == protocol.ClientDevice }

// LeaseEpoch is, in cluster mode, the epoch of the device's lease this
// link was registered under; 0 on a single node.
func (c *Link) LeaseEpoch() int64 { return c.leaseEpoch.Load() }

// Registry is where each client is: the set of online clients, one
// connection per client id (devices and constellations share the id
// space), and the devices between links: those whose link dropped less
// than their grace ago. Both change under one lock, so that a device is
// at every moment either online or between links until its grace ends:
// reach, the one question the dispatcher asks about a device, never
// finds it in neither state while its link is being replaced or lost.
type Registry struct {
	grace time.Duration
	// gone is called when a device's grace ends without it coming back.
	gone func(id string)

	mu   sync.RWMutex
	byID map[string]*Link
	away map[string]*deviceGrace // devices between links, by id
	// shutDown are the devices whose agent closed its link on purpose
	// (1001, going away) as it stopped, until they register again: gone
	// deliberately, they get no grace.
	shutDown map[string]bool
	closed   bool // no new graces: the server is stopping
}

// NewRegistry gives a device whose link drops grace to come back, and
// calls gone, outside any lock, if it does not.
func NewRegistry(grace time.Duration, gone func(id string)) *Registry {
	return &Registry{grace: grace, gone: gone, byID: map[string]*Link{}, away: map[string]*deviceGrace{}, shutDown: map[string]bool{}}
}

// deviceGrace is the time a device between links has to come back.
type deviceGrace struct {
	ends  time.Time
	timer *time.Timer
}

// Add makes c the connection of its id and returns the one it supersedes,
// if any. A device that was between links is back: its grace ends.
func (r *Registry) Add(c *Link) (old *Link) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old = r.byID[c.ID]
	r.byID[c.ID] = c
	if g, ok := r.away[c.ID]; ok {
		g.timer.Stop()
		delete(r.away, c.ID)
	}
	delete(r.shutDown, c.ID)
	return old
}

// Remove drops c if it is still its id's connection, and reports whether
// it was. A device is then between links, for its grace; or, if its agent
// closed the link on purpose as it stopped (goingAway), shut down, with
// no grace, and shutDown is true.
func (r *Registry) Remove(c *Link, goingAway bool) (removed, shutDown bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID[c.ID] != c {
		return false, false
	}
	delete(r.byID, c.ID)
	switch {
	case !c.IsDevice() || r.closed:
	case goingAway:
		r.shutDown[c.ID] = true
		return true, true
	default:
		r.startGrace(c.ID)
	}
	return true, false
}

// Grace is how long a device whose link drops has to come back.
func (r *Registry) Grace() time.Duration { return r.grace }

// startGrace gives device id its grace; r.mu is held.
func (r *Registry) startGrace(id string) {
	if g, ok := r.away[id]; ok {
		g.timer.Stop()
	}
	g := &deviceGrace{ends: time.Now().Add(r.grace)}
	g.timer = time.AfterFunc(r.grace, func() {
		r.mu.Lock()
		ended := r.away[id] == g
		if ended {
			delete(r.away, id)
		}
		r.mu.Unlock()
		if ended {
			r.gone(id)
		}
	})
	r.away[id] = g
}

// Whereabouts is where a device is, as reach finds it: online on link;
// between links, with graceLeft to come back in; shut down on purpose;
// or none of these (the zero value): offline, not seen since the server
// started, or past its grace.
type Whereabouts struct {
	Link      *Link
	GraceLeft time.Duration
	shutDown  bool
	// In cluster mode, from the device's lease: linked to node, under
	// the lease's leaseEpoch; or refused, why a command cannot reach it.
	node       string
	leaseEpoch int64
	refused    string
}

// Reach is where device id is.
func (r *Registry) Reach(id string) Whereabouts {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if c := r.byID[id]; c != nil && c.IsDevice() {
		return Whereabouts{Link: c}
	}
	if g, ok := r.away[id]; ok {
		return Whereabouts{GraceLeft: max(time.Until(g.ends), 0)}
	}
	return Whereabouts{shutDown: r.shutDown[id]}
}

func (r *Registry) Get(id string) *Link {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byID[id]
}

// Device returns the online device id, or nil.
func (r *Registry) Device(id string) *Link {
	if c := r.Get(id); c != nil && c.IsDevice() {
		return c
	}
	return nil
}

// Devices lists the online devices.
func (r *Registry) Devices() []*Link {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Link, 0, len(r.byID))
	for _, c := range r.byID {
		if c.IsDevice() {
			out = append(out, c)
		}
	}
	return out
}

// DeviceCount counts the online devices.
func (r *Registry) DeviceCount() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := 0
	for _, c := range r.byID {
		if c.IsDevice() {
			n++
		}
	}
	return n
}

// IDs lists the online clients, sorted.
func (r *Registry) IDs() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.byID))
	for id := range r.byID {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Disconnect takes device id offline at once, with no grace since it is
// not coming back, and closes its link without waiting for the peer's
// half of the closing handshake: a stale peer would hold the caller for
// seconds, and enrolling the id again right after must not meet the link.
func (r *Registry) Disconnect(id string, reason string) {
	r.mu.Lock()
	c := r.byID[id]
	if c == nil || !c.IsDevice() {
		r.mu.Unlock()
		return
	}
	delete(r.byID, id)
	r.mu.Unlock()
	go c.Conn.Close(websocket.StatusPolicyViolation, reason)
}

// moved forgets device id, linked to another node now: its link here,
// if any, which it returns for the caller to close, and its grace or
// shutdown here, which end without its grace's end being called.
func (r *Registry) moved(id string) *Link {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g, ok := r.away[id]; ok {
		g.timer.Stop()
		delete(r.away, id)
	}
	delete(r.shutDown, id)
	c := r.byID[id]
	if c == nil || !c.IsDevice() {
		return nil
	}
	delete(r.byID, id)
	return c
}

// CloseAll ends every grace and closes every connection, for shutdown,
// and waits until each has closed or given up on its peer. A server that
// stops waits for no device.
func (r *Registry) CloseAll(code websocket.StatusCode, reason string) {
	r.mu.Lock()
	r.closed = true
	for id, g := range r.away {
		g.timer.Stop()
		delete(r.away, id)
	}
	r.mu.Unlock()
	r.CloseLinks(code, reason)
}

// CloseLinks closes every link with code and reason, for a node that
// drains: each device is then between links here, in its grace, as for
// a link that dropped, until it registers with another node.
func (r *Registry) CloseLinks(code websocket.StatusCode, reason string) {
	r.mu.Lock()
	all := make([]*Link, 0, len(r.byID))
	for _, c := range r.byID {
		all = append(all, c)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Go(func() { c.Conn.Close(code, reason) })
	}
	wg.Wait()
}
