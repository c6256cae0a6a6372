package wsgateway

import (
	"testing"

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
