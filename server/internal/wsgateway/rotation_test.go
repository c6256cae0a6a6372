package wsgateway

import (
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/stretchr/testify/assert"
)

func TestAnOfferIsAnsweredOnceOnItsOwnLink(t *testing.T) {
	o := newTokenOffers()
	c, other := &dispatch.Link{ID: "kiosk-1"}, &dispatch.Link{ID: "kiosk-1"}
	o.add(c)
	o.acked(c)
	o.links[c].sent = &sentToken{responseID: "rt-1", hash: "h"}
	assert.Nil(t, o.take(other, "rt-1"), "another link of the same device")
	assert.Nil(t, o.take(c, "rt-2"), "another offer")
	assert.Nil(t, o.take(c, ""))
	assert.Equal(t, "h", o.take(c, "rt-1").hash)
	assert.Nil(t, o.take(c, "rt-1"), "answered already")
}

func TestALinkThatEndedGetsNoOffer(t *testing.T) {
	o := newTokenOffers()
	c := &dispatch.Link{ID: "kiosk-1"}
	o.add(c)
	o.forget(c)
	o.acked(c)
	assert.NotContains(t, o.links, c)
}

// An offer under way holds its own link alone: it reads and writes the
// store and sends on its link under that link's lock, and another link's
// registration, ack, answer or end must not wait for a slow store or a
// device that does not read.
func TestAnOfferUnderWayHoldsOnlyItsOwnLink(t *testing.T) {
	o := newTokenOffers()
	busy, other := &dispatch.Link{ID: "kiosk-1"}, &dispatch.Link{ID: "kiosk-2"}
	o.add(busy)
	o.acked(busy)
	under := o.get(busy)
	under.mu.Lock() // as offerRotation holds it across its I/O
	defer under.mu.Unlock()

	done := make(chan struct{})
	go func() {
		defer close(done)
		o.add(other)
		o.acked(other)
		o.take(other, "rt-1")
		o.forget(other)
		o.forget(busy)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("another link's registration, ack, answer and end waited for an offer under way")
	}
}
