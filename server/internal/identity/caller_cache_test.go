package identity

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestACachedCallerLastsUntilItsTokenExpiresItsTimeIsUpOrItIsRevoked(t *testing.T) {
	cc := newCallerCache(time.Minute, 10)
	now := time.Now()
	ann, bob := &Caller{Name: "ann"}, &Caller{Name: "bob"}

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
	cc.put("a", &Caller{Name: "ann"}, time.Time{}, gen, now)
	c, _ := cc.get("a", now)
	assert.Nil(t, c, "...so what it read may be stale")
}

func TestTheCallerCacheStaysWithinItsBound(t *testing.T) {
	cc := newCallerCache(time.Minute, 2)
	now := time.Now()
	for _, h := range []string{"a", "b", "c"} {
		_, gen := cc.get(h, now)
		cc.put(h, &Caller{Name: h}, time.Time{}, gen, now)
	}
	assert.LessOrEqual(t, len(cc.entries), 2)
	c, _ := cc.get("c", now)
	assert.NotNil(t, c, "the newest is kept")
}
