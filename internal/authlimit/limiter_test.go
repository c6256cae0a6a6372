package authlimit

import (
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSourceReadsXForwardedForFromTheRightPastTrustedProxies(t *testing.T) {
	l := NewLimiter([]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}, time.Now, slog.Default())
	for _, tc := range []struct {
		peer string
		xff  []string
		want string
	}{
		{"192.0.2.1:5000", []string{"203.0.113.7"}, "192.0.2.1"},
		{"10.0.0.5:5000", nil, "10.0.0.5"},
		{"10.0.0.5:5000", []string{"203.0.113.7"}, "203.0.113.7"},
		{"10.0.0.5:5000", []string{"198.51.100.1, 203.0.113.7, 10.0.0.9"}, "203.0.113.7"},
		{"10.0.0.5:5000", []string{"198.51.100.1", "203.0.113.7"}, "203.0.113.7"},
		{"10.0.0.5:5000", []string{"10.0.0.8, 10.0.0.9"}, "10.0.0.8"},
		{"10.0.0.5:5000", []string{"not-an-address"}, "10.0.0.5"},
		{"[::1]:5000", []string{"::ffff:203.0.113.7"}, "203.0.113.7"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		assert.Equal(t, tc.want, l.Source(r).String(), "%s %v", tc.peer, tc.xff)
	}
}

func TestTheLimiterForgetsTheOldestSourceWhenFull(t *testing.T) {
	now := time.Now()
	l := NewLimiter(nil, func() time.Time { return now }, slog.Default())
	for i := range maxAuthSources {
		l.failed(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), "aipo_guess")
		now = now.Add(time.Nanosecond)
	}
	require.Len(t, l.sources, maxAuthSources)
	newcomer := netip.MustParseAddr("192.0.2.1")
	l.failed(newcomer, "aipo_guess")
	assert.Len(t, l.sources, maxAuthSources, "bounded")
	assert.Contains(t, l.sources, newcomer)
	assert.NotContains(t, l.sources, netip.AddrFrom4([4]byte{10, 0, 0, 0}), "the oldest went")
}
