package inscope

import (
	"context"
	"maps"
	"sync"

	"github.com/edgeaip/edgeaip/server/internal/store"
)

// Device is what the command path needs to know of an enrolled
// device: that it is enrolled, and its labels (which scopes select on).
type Device struct {
	ID     string
	Labels map[string]string
}

// Enrolled answers the command path's "is this device enrolled?" from
// memory: a command used to read the device's row, info and all, on
// every call. An entry is read from the store the first time its device
// is asked for and kept until forget; every change of what an entry holds
// (an enrollment, a revocation, new labels) calls Forget, after it is
// committed, so that the next lookup reads the store again. Devices not
// enrolled are not cached: each lookup of one reads the store.
//
// In cluster mode, a node that hears of another node's enrollment,
// revocation or relabelling calls Forget too.
type Enrolled struct {
	store *store.Store

	mu   sync.RWMutex
	byID map[string]Device
	// gen counts calls of Forget: a lookup that read the store before
	// one does not keep what it read, which may be what was forgotten.
	gen uint64
}

// NewEnrolled is a cache, empty, of the devices st has enrolled.
func NewEnrolled(st *store.Store) *Enrolled {
	return &Enrolled{store: st, byID: map[string]Device{}}
}

// Get returns enrolled device id, or an error that is store.ErrNotFound
// if it is not enrolled. The caller must not change the labels.
func (c *Enrolled) Get(ctx context.Context, id string) (Device, error) {
	c.mu.RLock()
	d, ok := c.byID[id]
	gen := c.gen
	c.mu.RUnlock()
	if ok {
		return d, nil
	}
	row, err := c.store.Devices().Get(ctx, id)
	if err != nil {
		return Device{}, err
	}
	d = Device{ID: row.ID, Labels: maps.Clone(row.Labels)}
	c.keep(d, gen)
	return d, nil
}

// keep caches d, read from the store when the count of forgets was gen,
// unless a forget came since.
func (c *Enrolled) keep(d Device, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		c.byID[d.ID] = d
	}
}

// Forget drops device id, whose enrollment or labels changed: the next
// get reads it from the store.
func (c *Enrolled) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byID, id)
	c.gen++
}
