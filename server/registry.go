package server

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/protocol"
)

// client is one registered connection: a device agent, or a constellation
// client bound to one target device.
type client struct {
	id     string
	typ    protocol.ClientType
	conn   *protocol.Conn
	target string // constellations: the device they drive
	// info is a device's system info, nil if it sent none we could read.
	// A device that registers again on its connection replaces it.
	info   atomic.Pointer[protocol.SystemInfo]
	seenAt atomic.Int64 // devices: when last_seen was last written, unix ns
}

func (c *client) isDevice() bool { return c.typ == protocol.ClientDevice }

// registry is the set of online clients, one connection per client id.
// Devices and constellations share the id space.
type registry struct {
	mu   sync.RWMutex
	byID map[string]*client
}

func newRegistry() *registry { return &registry{byID: map[string]*client{}} }

// add makes c the connection of its id and returns the one it supersedes,
// if any.
func (r *registry) add(c *client) (old *client) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old = r.byID[c.id]
	r.byID[c.id] = c
	return old
}

// remove drops c if it is still its id's connection, and reports whether
// it was.
func (r *registry) remove(c *client) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID[c.id] == c {
		delete(r.byID, c.id)
		return true
	}
	return false
}

func (r *registry) get(id string) *client {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byID[id]
}

// device returns the online device id, or nil.
func (r *registry) device(id string) *client {
	if c := r.get(id); c != nil && c.isDevice() {
		return c
	}
	return nil
}

// deviceCount counts the online devices.
func (r *registry) deviceCount() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := 0
	for _, c := range r.byID {
		if c.isDevice() {
			n++
		}
	}
	return n
}

// ids lists the online clients, sorted.
func (r *registry) ids() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.byID))
	for id := range r.byID {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// disconnect closes the client's connection, if it has one, without
// waiting for the peer's half of the closing handshake: a stale peer
// would hold the caller for seconds.
func (r *registry) disconnect(id string, reason string) {
	if c := r.get(id); c != nil {
		go c.conn.Close(websocket.StatusPolicyViolation, reason)
	}
}

// closeAll closes every connection, for shutdown, and waits until each
// has closed or given up on its peer.
func (r *registry) closeAll() {
	r.mu.RLock()
	all := make([]*client, 0, len(r.byID))
	for _, c := range r.byID {
		all = append(all, c)
	}
	r.mu.RUnlock()
	var wg sync.WaitGroup
	for _, c := range all {
		wg.Go(func() { c.conn.Close(websocket.StatusGoingAway, "server shutting down") })
	}
	wg.Wait()
}
