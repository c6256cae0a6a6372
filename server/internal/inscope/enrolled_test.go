package inscope

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A lookup that read the store before a forget does not keep what it
// read: it may be the enrollment that was just revoked.
func TestALookupRacingAForgetKeepsNothing(t *testing.T) {
	c := NewEnrolled(nil)
	read := func() uint64 { c.mu.RLock(); defer c.mu.RUnlock(); return c.gen }
	cached := func(id string) bool { c.mu.RLock(); defer c.mu.RUnlock(); _, ok := c.byID[id]; return ok }

	gen := read() // a lookup misses, then reads the store
	c.Forget("kiosk")
	c.keep(Device{ID: "kiosk"}, gen)
	assert.False(t, cached("kiosk"), "read before a forget: dropped")

	c.keep(Device{ID: "kiosk"}, read())
	assert.True(t, cached("kiosk"), "no forget in between: kept")
}
