package link

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestADeadServerIsPassedOverWithinTheRoundNotAfterABackoff(t *testing.T) {
	live := newPeer(t, "127.0.0.1:0")
	var refusals atomic.Int64
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refusals.Add(1)
		http.Error(w, "node starting", http.StatusServiceUnavailable)
	}))
	t.Cleanup(refusing.Close)
	servers := []string{deadURL(t), "ws" + strings.TrimPrefix(refusing.URL, "http") + "/ws", live.url()}

	const devices = 6 // each starts at a random server: together, most orders
	var logs []fmt.Stringer
	for i := range devices {
		logs = append(logs, startLink(t, fmt.Sprintf("dev-%d", i), servers, nil))
	}
	for range devices {
		live.next(t)
	}
	assert.LessOrEqual(t, refusals.Load(), int64(devices), "each device tried the failing server once at most")
	for _, l := range logs {
		assert.NotContains(t, l.String(), "every server failed", "no device waited a backoff")
	}
}

func TestALinkMovesToTheNextServerWhenItsServerDies(t *testing.T) {
	a, b := newPeer(t, "127.0.0.1:0"), newPeer(t, "127.0.0.1:0")
	logs := startLink(t, "dev-1", []string{a.url(), b.url()}, nil)
	first, other, _ := whichRegistered(t, a, b)
	first.kill()
	other.next(t)
	assert.Contains(t, logs.String(), `msg="link down; reconnecting" server=`+first.url())
	assert.Contains(t, logs.String(), `to="the next server"`)
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), `msg=registered server=`+other.url()) },
		testenv.Slowdown*10*time.Second, 10*time.Millisecond, "the log names the server registered with")
}

func TestEachAddressOfANameIsTriedAndTheNameIsLookedUpAgainEachRound(t *testing.T) {
	two := newPeer(t, "127.0.0.2:0")
	_, port, err := net.SplitHostPort(two.srv.Listener.Addr().String())
	require.NoError(t, err)
	three := newPeer(t, "127.0.0.3:"+port)
	dns := newDNSServer(t, netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"))
	url := "ws://aip.test:" + port + "/ws"
	logs := startLink(t, "dev-1", []string{url}, func(o *Options) { o.Resolver = dns.resolver() })

	first, other, l := whichRegistered(t, two, three)
	assert.Equal(t, "aip.test:"+port, l.host, "dialled at an address, under the name")
	first.kill()
	other.next(t)
	assert.Contains(t, logs.String(), "server=\""+url+" at "+first.srv.Listener.Addr().String()+"\"")

	four := newPeer(t, "127.0.0.4:"+port)
	dns.answer(netip.MustParseAddr("127.0.0.4"))
	other.kill()
	four.next(t)
}

func TestAnAddressIsDialledUnderTheNameItsCertificateNames(t *testing.T) {
	p := newTLSPeer(t, "127.0.0.2:0")
	_, port, err := net.SplitHostPort(p.srv.Listener.Addr().String())
	require.NoError(t, err)
	dns := newDNSServer(t, netip.MustParseAddr("127.0.0.2"))
	roots := x509.NewCertPool()
	roots.AddCert(p.srv.Certificate())
	// The certificate names example.com and 127.0.0.1, not 127.0.0.2:
	// verified against the address, it would be refused.
	startLink(t, "dev-1", []string{"wss://example.com:" + port + "/ws"}, func(o *Options) {
		o.Resolver, o.TLS = dns.resolver(), &tls.Config{RootCAs: roots}
	})
	assert.Equal(t, "example.com:"+port, p.next(t).host)
}

func TestADrainingServersLinksMoveToTheNextServerSpreadOverTheWindow(t *testing.T) {
	a, b := newPeer(t, "127.0.0.1:0"), newPeer(t, "127.0.0.1:0")
	logs := startLink(t, "dev-1", []string{a.url(), b.url()}, nil)
	first, other, _ := whichRegistered(t, a, b)
	first.closeAll(int(websocket.StatusServiceRestart), "draining")
	other.next(t)
	assert.Contains(t, logs.String(), `msg="server draining; moving to the next" server=`+first.url())
	assert.NotContains(t, logs.String(), "link down", "a drain is no failure")
}

func TestTheLinksOfADrainingServerComeBackSpreadNotAllAtOnce(t *testing.T) {
	const links, spread = 20, 2 * time.Second
	p := newPeer(t, "127.0.0.1:0")
	for i := range links {
		startLink(t, fmt.Sprintf("dev-%d", i), []string{p.url()}, func(o *Options) { o.Pace.DrainSpread = spread })
	}
	for range links {
		p.next(t)
	}
	drained := time.Now()
	p.closeAll(int(websocket.StatusServiceRestart), "draining")
	var early, late int
	for range links {
		switch since := p.next(t).at.Sub(drained); {
		case since < spread/10:
			early++
		case since > spread/2:
			late++
		}
	}
	assert.Less(t, early, links/2, "fewer than half come back in the window's first tenth")
	assert.Positive(t, late, "some come back in the window's second half")
}

// whichRegistered waits for a link to register at a or b, and returns
// that peer, the other, and the link.
func whichRegistered(t *testing.T, a, b *peer) (first, other *peer, l *peerLink) {
	t.Helper()
	select {
	case l = <-a.links:
		return a, b, l
	case l = <-b.links:
		return b, a, l
	case <-time.After(testenv.Slowdown * 20 * time.Second):
		t.Fatal("the link did not register")
		return nil, nil, nil
	}
}

func TestTheLinksOfADeadServerSpreadOverTheOthers(t *testing.T) {
	const links = 60
	peers := []*peer{newPeer(t, "127.0.0.1:0"), newPeer(t, "127.0.0.1:0"), newPeer(t, "127.0.0.1:0")}
	var urls []string
	for _, p := range peers {
		urls = append(urls, p.url())
	}
	for i := range links {
		startLink(t, fmt.Sprintf("dev-%d", i), urls, nil)
	}
	on := make([]int, len(peers))
	for range links {
		select {
		case <-peers[0].links:
			on[0]++
		case <-peers[1].links:
			on[1]++
		case <-peers[2].links:
			on[2]++
		case <-time.After(testenv.Slowdown * 20 * time.Second):
			t.Fatal("not every link registered")
		}
	}
	for i, n := range on {
		assert.Positive(t, n, "links start at %s too", urls[i])
	}
	peers[0].kill()
	moved := make([]int, len(peers))
	for range on[0] {
		select {
		case <-peers[1].links:
			moved[1]++
		case <-peers[2].links:
			moved[2]++
		case <-time.After(testenv.Slowdown * 20 * time.Second):
			t.Fatal("not every link of the dead server moved")
		}
	}
	assert.Positive(t, moved[1], "some move to the second server")
	assert.Positive(t, moved[2], "and some to the third, not all to the next in the list")
}
