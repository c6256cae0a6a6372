package wsgateway

import (
	"context"
	"fmt"
	"sync"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/google/uuid"
)

// A device token's rotation (server/RATIONALE.md, "Rotating a device's token")
// is asked for over the HTTP API, which records it pending; the gateway
// then offers the device its new token, in a ROTATE_TOKEN on the CBOR
// wire, once per link and only after the link's REGISTER was
// acknowledged, and takes its answer: TOKEN_ROTATED confirms the
// rotation; a refusal, or an ERROR from an agent too old to know
// ROTATE_TOKEN, fails it.

// sentToken is a new token offered on a link and not yet answered.
type sentToken struct {
	responseID string
	hash       string
}

// OfferRotationTo offers a new token to device id if its link is held
// here, and reports whether it is. In cluster mode the node that holds it
// hears of the request (cluster.DeviceRotate) and offers it there; a
// device linked nowhere gets it when it next registers, on whatever node.
func (g *Gateway) OfferRotationTo(ctx context.Context, id string) bool {
	c := g.reg.Device(id)
	if c != nil {
		g.offerRotation(ctx, c)
	}
	return c != nil
}

// registered marks device c's REGISTER acknowledged, and offers it a new
// token if a rotation of its token waits for it.
func (g *Gateway) registered(ctx context.Context, c *dispatch.Link) {
	g.offers.acked(c)
	g.offerRotation(ctx, c)
}

// offerRotation sends device c a new token if a rotation of its token is
// pending: once per link, and only once the link is registered, so that
// the device never gets one before its REGISTER's ack.
func (g *Gateway) offerRotation(ctx context.Context, c *dispatch.Link) {
	offer := g.offers.get(c)
	if offer == nil {
		return
	}
	// This link's lock alone is held across the store and the send:
	// another link's registration, teardown or answer never waits on them.
	offer.mu.Lock()
	defer offer.mu.Unlock()
	if !offer.acked || offer.sent != nil {
		return
	}
	d, err := g.store.Device(ctx, c.ID)
	if err != nil || d.Rotation == nil {
		return
	}
	if c.Conn.Encoding() != protocol.CBOR {
		g.auth.FailRotation(ctx, c.ID, "its link is JSON, UFO's wire, which cannot carry a new token: enroll it again to give it one")
		return
	}
	token := identity.NewToken(identity.DeviceTokenPrefix)
	sent := &sentToken{responseID: uuid.NewString(), hash: identity.HashToken(token)}
	if err := g.store.Write(ctx, func(tx *store.Tx) error { return tx.SendRotation(c.ID, sent.hash) }); err != nil {
		g.log.Warn("new token not recorded; none sent", "device", c.ID, "err", err)
		return
	}
	offer.sent = sent
	msg := &protocol.ServerMessage{Type: protocol.ServerRotateToken, Status: protocol.StatusOK, Timestamp: protocol.Now(),
		ResponseID: sent.responseID, Token: token}
	if err := g.send(c.Conn, msg); err != nil {
		g.log.Warn("new token not sent; another goes when the device next registers", "device", c.ID, "err", err)
		return
	}
	g.log.Info("new token sent to the device", "device", c.ID, "response_id", sent.responseID)
}

// tokenOffers are, for each device link, whether its REGISTER was
// acknowledged and the new token offered on it and not yet answered: a
// link gets at most one offer at a time, and none before its ack. A link
// is in it from its registration until it ends (forget), so that an offer
// that comes late finds it gone. The map's lock guards only the map; each
// link's offer has a lock of its own.
type tokenOffers struct {
	mu    sync.Mutex
	links map[*dispatch.Link]*linkOffer
}

// linkOffer is a device link's part in token rotation.
type linkOffer struct {
	// mu is held across an offer's store read and write and its send.
	mu    sync.Mutex
	acked bool       // its REGISTER was acknowledged
	sent  *sentToken // the new token offered on it, unanswered
}

func newTokenOffers() *tokenOffers { return &tokenOffers{links: map[*dispatch.Link]*linkOffer{}} }

// add makes c, a device's link registering now, one tokens may be offered on.
func (o *tokenOffers) add(c *dispatch.Link) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.links[c] = &linkOffer{}
}

// get is c's offer, or nil once c has ended.
func (o *tokenOffers) get(c *dispatch.Link) *linkOffer {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.links[c]
}

// acked marks c's REGISTER acknowledged, unless c has ended.
func (o *tokenOffers) acked(c *dispatch.Link) {
	if l := o.get(c); l != nil {
		l.mu.Lock()
		l.acked = true
		l.mu.Unlock()
	}
}

// take returns the token offered on c's link whose rotate_token had
// response id rid, and forgets it; nil if there is none.
func (o *tokenOffers) take(c *dispatch.Link, rid string) *sentToken {
	l := o.get(c)
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sent == nil || rid == "" || l.sent.responseID != rid {
		return nil
	}
	sent := l.sent
	l.sent = nil
	return sent
}

// forget drops c's link, which ended, with what was offered on it.
func (o *tokenOffers) forget(c *dispatch.Link) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.links, c)
}

// rotationAnswered takes a device's TOKEN_ROTATED: it confirms the
// rotation, or says why the device could not keep its new token, which
// then keeps its old one.
func (g *Gateway) rotationAnswered(ctx context.Context, c *dispatch.Link, m *protocol.ClientMessage) {
	sent := g.offers.take(c, m.PrevResponseID)
	if sent == nil {
		g.sendError(ctx, c.Conn, fmt.Sprintf("field \"prev_response_id\": %q names no new token sent on this link", m.PrevResponseID), m.RequestID)
		return
	}
	if m.Status != protocol.StatusOK {
		g.auth.FailRotation(ctx, c.ID, "the device could not keep its new token: "+m.Error)
		return
	}
	g.auth.ConfirmRotation(ctx, c.ID, sent.hash, "the device confirmed it")
}

// rotationRefused takes an ERROR from device c that answers the new token
// offered on its link, as an agent that does not know ROTATE_TOKEN sends,
// and reports whether it did.
func (g *Gateway) rotationRefused(ctx context.Context, c *dispatch.Link, m *protocol.ClientMessage) bool {
	if g.offers.take(c, m.PrevResponseID) == nil {
		return false
	}
	g.auth.FailRotation(ctx, c.ID, "the device refused its new token (an agent too old to rotate its token?): "+m.Error)
	return true
}
