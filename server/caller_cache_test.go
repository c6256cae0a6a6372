package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestACachedCallerLastsUntilItsTokenExpiresItsTimeIsUpOrItIsRevoked(t *testing.T) {
	cc := newCallerCache(time.Minute, 10)
	now := time.Now()
	ann, bob := &caller{name: "ann"}, &caller{name: "bob"}

	_, gen := cc.get("a", now)
	cc.put("a", ann, now.Add(time.Second), gen, now)
	_, gen = cc.get("b", now)
	cc.put("b", bob, time.Time{}, gen, now)
	c, _ := cc.get("a", now)
	assert.Same(t, ann, c)
	c, _ = cc.get("a", now.Add(time.Second))
	assert.Nil(t, c, "a token is not taken once it has expired")
	c, _ = cc.get("b", now.Add(time.Minute+time.Nanosecond))
	assert.Nil(t, c, "an entry is read from the store again after its time")

	_, gen = cc.get("b", now)
	cc.put("b", bob, time.Time{}, gen, now)
	cc.forget("ann")
	c, _ = cc.get("b", now)
	assert.Same(t, bob, c, "a revocation drops its identity's tokens alone")
	cc.forget("bob")
	c, _ = cc.get("b", now)
	assert.Nil(t, c)
}

func TestACallerReadFromTheStoreWhileItWasRevokedIsNotKept(t *testing.T) {
	cc := newCallerCache(time.Minute, 10)
	now := time.Now()
	_, gen := cc.get("a", now) // a request misses and reads the store...
	cc.forget("ann")           // ...the token is revoked meanwhile...
	cc.put("a", &caller{name: "ann"}, time.Time{}, gen, now)
	c, _ := cc.get("a", now)
	assert.Nil(t, c, "...so what it read may be stale")
}

func TestTheCallerCacheStaysWithinItsBound(t *testing.T) {
	cc := newCallerCache(time.Minute, 2)
	now := time.Now()
	for _, h := range []string{"a", "b", "c"} {
		_, gen := cc.get(h, now)
		cc.put(h, &caller{name: h}, time.Time{}, gen, now)
	}
	assert.LessOrEqual(t, len(cc.entries), 2)
	c, _ := cc.get("c", now)
	assert.NotNil(t, c, "the newest is kept")
}

// TestATokenRevokedInTheStoreWorksHereUntilTheRevocationComes pins down
// that Server.Revoked is what makes a revocation act on a node: a token
// deleted from a shared store by another node is refused here once its
// revocation is carried here, and is not read from the store per request
// until then (within the cache's time).
func TestATokenRevokedInTheStoreWorksHereUntilTheRevocationComes(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	ann := ts.addIdentity("ann", api.RoleViewer, nil)
	_, err := ts.as(ann).WhoAmI(ctx)
	require.NoError(t, err)

	err = ts.srv.store.Write(ctx, func(tx *store.Tx) error { _, err := tx.DeleteIdentity("ann"); return err })
	require.NoError(t, err)
	_, err = ts.as(ann).WhoAmI(ctx)
	require.NoError(t, err, "another node's revocation has not come yet")

	ts.srv.Revoked(Revocation{Identity: "ann"})
	_, err = ts.as(ann).WhoAmI(ctx)
	requireStatus(t, err, http.StatusUnauthorized, "wrong operator token")
}
