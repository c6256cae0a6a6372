package server

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/protocol"
)

// deviceConn is one registered device connection.
type deviceConn struct {
	id          string
	conn        *protocol.Conn
	connectedAt time.Time
	// info is nil if the device sent none we could read. A device that
	// registers again on its connection replaces it.
	info atomic.Pointer[protocol.SystemInfo]
}

// registry is the set of online devices, one connection per device id.
type registry struct {
	mu   sync.RWMutex
	byID map[string]*deviceConn
}

func newRegistry() *registry { return &registry{byID: map[string]*deviceConn{}} }

// add makes dc the device's connection and returns the one it supersedes,
// if any. A device that reconnects before the server noticed its old link
// die replaces that stale link.
func (r *registry) add(dc *deviceConn) (old *deviceConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old = r.byID[dc.id]
	r.byID[dc.id] = dc
	return old
}

// remove drops dc if it is still the device's connection.
func (r *registry) remove(dc *deviceConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byID[dc.id] == dc {
		delete(r.byID, dc.id)
	}
}

func (r *registry) get(id string) *deviceConn {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byID[id]
}

// ids lists the online devices, sorted.
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

// disconnect closes the device's connection, if it has one.
func (r *registry) disconnect(id string, reason string) {
	if dc := r.get(id); dc != nil {
		dc.conn.Close(websocket.StatusPolicyViolation, reason)
	}
}

// closeAll closes every connection, for shutdown.
func (r *registry) closeAll() {
	r.mu.RLock()
	conns := make([]*deviceConn, 0, len(r.byID))
	for _, dc := range r.byID {
		conns = append(conns, dc)
	}
	r.mu.RUnlock()
	for _, dc := range conns {
		dc.conn.Close(websocket.StatusGoingAway, "server shutting down")
	}
}
