package server

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/authlimit"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// limitedServer is a test server whose limit on failed authentications
// runs on a fake clock.
func limitedServer(t *testing.T, configure ...func(*Config)) (*testServer, *fakeClock) {
	ts := newTestServer(t, configure...)
	clock := &fakeClock{t: time.Now()}
	ts.srv.authLimit.SetClock(clock.now)
	return ts, clock
}

// gather reads the server's metrics from its registry, not over HTTP,
// which a refused source could not.
func (ts *testServer) gather() map[string]*dto.MetricFamily {
	ts.t.Helper()
	fams, err := ts.srv.metrics.Registry().Gather()
	require.NoError(ts.t, err)
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

// wrongTokens sends n requests with wrong tokens, each another, each
// with header.
func (ts *testServer) wrongTokens(n int, header ...string) {
	ts.t.Helper()
	guesser := rand.Text()
	for i := range n {
		rq := probeRequest{method: "GET", path: "/api/devices", header: http.Header{}}
		for j := 0; j+1 < len(header); j += 2 {
			rq.header.Set(header[j], header[j+1])
		}
		code, _ := ts.call("aipo_"+guesser+strconv.Itoa(i), rq)
		require.Equal(ts.t, http.StatusUnauthorized, code, "guess %d", i)
	}
}

func TestTwentyFailedAuthenticationsInAMinuteRefuseTheSourceForAMinute(t *testing.T) {
	ts, clock := limitedServer(t)
	devices := probeRequest{method: "GET", path: "/api/devices"}
	// Good tokens never count, nor do requests without one.
	for range 50 {
		code, _ := ts.call(ts.api.Token, devices)
		require.Equal(t, http.StatusOK, code)
		code, _ = ts.call("", devices)
		require.Equal(t, http.StatusUnauthorized, code)
	}
	// 19 failures, then a minute's quiet: the window has moved on.
	ts.wrongTokens(19)
	clock.advance(authlimit.AuthWindow)
	ts.wrongTokens(19)
	code, _ := ts.call(ts.api.Token, devices)
	require.Equal(t, http.StatusOK, code, "19 within a minute are not 20")

	ts.wrongTokens(1)
	req, _ := http.NewRequest("GET", ts.http.URL+"/api/devices", nil)
	req.Header.Set("Authorization", "Bearer "+ts.api.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the right token too: guessing must go no faster")
	assert.Equal(t, "60", resp.Header.Get("Retry-After"))
	code, _ = ts.call(ts.api.Token, jsonRequest("POST", "/api/login", api.LoginRequest{Token: ts.api.Token}))
	assert.Equal(t, http.StatusTooManyRequests, code, "the dashboard's login")
	_, err = ts.dial(ts.api.Token)
	assert.ErrorContains(t, err, "429", "WebSocket upgrades")
	code, body := ts.call("", probeRequest{method: "GET", path: "/api/health"})
	assert.Equal(t, http.StatusOK, code, "health stays open for load balancers")
	assert.NotContains(t, body, "online_clients")

	fams := ts.gather()
	assert.Equal(t, 39.0, metric(t, fams, "edgeaip_auth_failures_total", "surface", "api"))
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_auth_throttled_total", "surface", "api"))
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_auth_throttled_total", "surface", "login"))
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_auth_throttled_total", "surface", "websocket"))
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_auth_blocked_sources"))
	assert.Contains(t, ts.logs.String(), "too many failed authentications: refusing the source")

	clock.advance(authlimit.AuthBlock - time.Second)
	code, _ = ts.call(ts.api.Token, devices)
	assert.Equal(t, http.StatusTooManyRequests, code, "for a whole minute")
	clock.advance(time.Second)
	code, _ = ts.call(ts.api.Token, devices)
	assert.Equal(t, http.StatusOK, code, "and no more")
	assert.Equal(t, 0.0, metric(t, ts.gather(), "edgeaip_auth_blocked_sources"))
}

func TestAWrongTokenTriedAgainCountsOnce(t *testing.T) {
	ts, clock := limitedServer(t)
	// A revoked device retrying, all day: one failure a window.
	stale := ts.enroll("kiosk-1")
	require.NoError(t, ts.api.Revoke(context.Background(), "kiosk-1"))
	for range 3 {
		for range 5 * authlimit.AuthFailures {
			_, err := ts.dial(stale)
			require.ErrorContains(t, err, "401")
		}
		clock.advance(authlimit.AuthWindow / 2)
	}
	code, _ := ts.call(ts.api.Token, probeRequest{method: "GET", path: "/api/devices"})
	assert.Equal(t, http.StatusOK, code, "its site's address is not refused")
	assert.Equal(t, float64(15*authlimit.AuthFailures), metric(t, ts.gather(), "edgeaip_auth_failures_total", "surface", "websocket"),
		"the metric counts every failure")

	// Guesses, each another token, do count: with the stale one, 20.
	ts.wrongTokens(authlimit.AuthFailures - 1)
	code, _ = ts.call(ts.api.Token, probeRequest{method: "GET", path: "/api/devices"})
	assert.Equal(t, http.StatusTooManyRequests, code)
}

// A device token a rotation retired, once its grace has ended, is a
// failed authentication like a wrong one; within its grace it works.
func TestARetiredDeviceTokenCountsAsAFailedAuthentication(t *testing.T) {
	ts, _ := limitedServer(t)
	old, rc := ts.linked("kiosk-1")
	answer := ts.rotate("kiosk-1", api.RotateRequest{})
	rc.keepToken(rc.recvType(protocol.ServerRotateToken))
	assert.Equal(t, api.RotationConfirmed, ts.rotated(answer).State)

	ts.refusedAtUpgrade(old, "retired by a rotation")
	assert.Equal(t, 1.0, metric(t, ts.gather(), "edgeaip_auth_failures_total", "surface", "websocket"))
	ts.wrongTokens(authlimit.AuthFailures - 1)
	code, _ := ts.call(ts.api.Token, probeRequest{method: "GET", path: "/api/devices"})
	assert.Equal(t, http.StatusTooManyRequests, code, "with the retired token, 20")
}

func TestFailuresOnEverySurfaceCount(t *testing.T) {
	ts, _ := limitedServer(t)
	for i := range 10 {
		code, _ := ts.call("", jsonRequest("POST", "/api/login", api.LoginRequest{Token: "aipo_no" + strconv.Itoa(i)}))
		require.Equal(t, http.StatusUnauthorized, code)
		_, err := ts.dial("aipd_no" + strconv.Itoa(i))
		require.ErrorContains(t, err, "401")
	}
	code, _ := ts.call(ts.api.Token, probeRequest{method: "GET", path: "/api/devices"})
	assert.Equal(t, http.StatusTooManyRequests, code)
	fams := ts.gather()
	assert.Equal(t, 10.0, metric(t, fams, "edgeaip_auth_failures_total", "surface", "login"))
	assert.Equal(t, 10.0, metric(t, fams, "edgeaip_auth_failures_total", "surface", "websocket"))
}

func TestTheSourceComesFromXForwardedForOnlyFromATrustedProxy(t *testing.T) {
	// Loopback is the proxy in front: the clients are behind it.
	ts, _ := limitedServer(t, func(c *Config) { c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} })
	ts.wrongTokens(authlimit.AuthFailures, "X-Forwarded-For", "203.0.113.7")
	code, _ := ts.call(ts.api.Token, probeRequest{method: "GET", path: "/api/devices", header: http.Header{"X-Forwarded-For": {"203.0.113.7"}}})
	assert.Equal(t, http.StatusTooManyRequests, code, "the client behind the proxy is refused")
	code, _ = ts.call(ts.api.Token, probeRequest{method: "GET", path: "/api/devices", header: http.Header{"X-Forwarded-For": {"203.0.113.8"}}})
	assert.Equal(t, http.StatusOK, code, "its neighbours behind the same proxy are not")

	// Not trusted, the header is the client's to forge: it changes
	// nothing.
	ts, _ = limitedServer(t)
	for i := range authlimit.AuthFailures {
		code, _ := ts.call("aipo_guess"+strconv.Itoa(i), probeRequest{method: "GET", path: "/api/devices",
			header: http.Header{"X-Forwarded-For": {"198.51.100." + strconv.Itoa(i)}}})
		require.Equal(t, http.StatusUnauthorized, code)
	}
	code, _ = ts.call(ts.api.Token, probeRequest{method: "GET", path: "/api/devices", header: http.Header{"X-Forwarded-For": {"198.51.100.99"}}})
	assert.Equal(t, http.StatusTooManyRequests, code)
}
