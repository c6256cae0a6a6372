package server

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/natstest"
	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/edgeaip/edgeaip/internal/testpki"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/cluster"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testCluster is nodes sharing one PostgreSQL database, one NATS server
// and one operator token.
type testCluster struct {
	t     *testing.T
	nats  *natstest.Server
	store string
	token []byte // admin.token of the first node, given to the others
}

func newTestCluster(t *testing.T) *testCluster {
	return &testCluster{t: t, nats: natstest.Start(t), store: pgtest.Shared(t).NewDatabase(t)}
}

// clusterConfig makes c a node id of tc, with a fast lease.
func (tc *testCluster) clusterConfig(id string) func(*Config) {
	return func(c *Config) {
		c.Store.URL = tc.store
		c.Cluster = ClusterConfig{NATS: tc.nats.URL(), NodeID: id, Address: id + ":8700",
			Heartbeat: 250 * time.Millisecond, DeadAfter: 1500 * time.Millisecond}
		if tc.token != nil {
			require.NoError(tc.t, os.WriteFile(filepath.Join(c.DataDir, AdminTokenFile), tc.token, 0o600))
		}
	}
}

// sql is a function that runs a statement on tc's store, as its owner.
func (tc *testCluster) sql(t *testing.T) func(stmt string) {
	return func(stmt string) { t.Helper(); pgtest.Exec(t, tc.store, stmt) }
}

// node starts node id.
func (tc *testCluster) node(id string, configure ...func(*Config)) *testServer {
	tc.t.Helper()
	ts := newTestServer(tc.t, append([]func(*Config){tc.clusterConfig(id)}, configure...)...)
	if tc.token == nil {
		tok, err := os.ReadFile(filepath.Join(ts.dir, AdminTokenFile))
		require.NoError(tc.t, err)
		tc.token = tok
	}
	return ts
}

// newNode is New for node id of tc, for starts meant to fail.
func (tc *testCluster) newNode(id string, configure ...func(*Config)) (*Server, error) {
	cfg := Config{DataDir: tc.t.TempDir()}
	tc.clusterConfig(id)(&cfg)
	for _, c := range configure {
		c(&cfg)
	}
	s, err := New(context.Background(), cfg)
	if err == nil {
		tc.t.Cleanup(func() { s.Close() })
	}
	return s, err
}

func TestAClusterNodeRefusesSQLiteAndANodeIDThatIsLive(t *testing.T) {
	tc := newTestCluster(t)
	_, err := tc.newNode("a", func(c *Config) { c.Store.URL = "" })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cluster mode (--nats) needs a PostgreSQL store")

	a := tc.node("a")
	live, err := a.srv.cluster.Live(context.Background())
	require.NoError(t, err)
	require.Len(t, live, 1)
	_, err = tc.newNode("a")
	require.ErrorIs(t, err, store.ErrNodeLive)
	tc.node("b")
	live, err = a.srv.cluster.Live(context.Background())
	require.NoError(t, err)
	assert.Len(t, live, 2)
}

func TestAClusterNodeFailsToStartWithoutNATS(t *testing.T) {
	tc := newTestCluster(t)
	tc.nats.Stop()
	_, err := tc.newNode("a")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cluster: NATS "+tc.nats.URL()+": ")
}

// NATS lost at run time: the node says it is degraded, naming NATS, and
// is healthy again once NATS is back.
func TestANodeThatLosesNATSIsDegradedUntilItIsBack(t *testing.T) {
	tc := newTestCluster(t)
	a := tc.node("a")
	code, _ := a.health()
	require.Equal(t, http.StatusOK, code)
	tc.nats.Stop()
	require.Eventually(t, func() bool { code, _ = a.health(); return code == http.StatusServiceUnavailable }, 5*time.Second, 10*time.Millisecond)
	_, h := a.health()
	assert.Equal(t, "degraded", h.Status)
	assert.Contains(t, h.Cause, "NATS: not connected")
	require.NoError(t, tc.nats.Start())
	require.Eventually(t, func() bool { code, _ = a.health(); return code == http.StatusOK }, 10*time.Second, 10*time.Millisecond)
}

// Every client NATS lets in is trusted as a node, so an operator's NATS
// asks for credentials and TLS: a node with the password in its URL and
// the NATS server's CA (--nats-ca) joins and works across nodes; one with
// a wrong password, or without the CA, fails at start naming NATS, and
// its error does not show the password.
func TestAClusterNodeJoinsANATSThatAsksForAPasswordAndTLS(t *testing.T) {
	ca := testpki.NewCA(t, "nats")
	leaf := ca.Issue(t, testpki.Loopback())
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	require.NoError(t, err)
	ns := natstest.StartWith(t, natstest.Options{User: "aip", Password: "s3cret-pw",
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	caPath, _ := ca.WriteCA(t, t.TempDir(), "nats-ca")
	tc := &testCluster{t: t, nats: ns, store: pgtest.Shared(t).NewDatabase(t)}
	natsAs := func(password, caFile string) func(*Config) {
		return func(c *Config) {
			u, err := url.Parse(ns.URL())
			require.NoError(t, err)
			u.User = url.UserPassword("aip", password)
			c.Cluster.NATS, c.Cluster.NATSCA = u.String(), caFile
		}
	}

	_, err = tc.newNode("a", natsAs("wrong-pw", caPath))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cluster: NATS tls://aip:xxxxx@127.0.0.1:")
	assert.Contains(t, strings.ToLower(err.Error()), "authorization violation")
	assert.NotContains(t, err.Error(), "wrong-pw")
	_, err = tc.newNode("a", natsAs("s3cret-pw", ""))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cluster: NATS tls://aip:xxxxx@127.0.0.1:")
	assert.Contains(t, err.Error(), "certificate signed by unknown authority")

	a, b := tc.node("a", natsAs("s3cret-pw", caPath)), tc.node("b", natsAs("s3cret-pw", caPath))
	dev, _ := tc.linkedTo(b, a, "kiosk-1")
	out := a.echoInBackground("kiosk-1")
	dev.answer(dev.nextCommand(), protocol.ResultSuccess, "res-1")
	assert.Equal(t, "success", (<-out).Status)
}

// A careless operator's cluster flags fail the start before anything is
// written (no data dir), naming the flag's value; a password or token
// in the NATS or store URL is in no error.
func TestBadClusterFlagsFailTheStartNamingThemAndNoSecret(t *testing.T) {
	const secret = "s3cretpw"
	good := ClusterConfig{NATS: "nats://127.0.0.1:4222", NodeID: "a", Address: "10.0.0.1:8700"}
	for _, tc := range []struct {
		name, want string
		edit       func(*ClusterConfig)
	}{
		{"node id with a dot", `node id "a.b": want 1-63 of [A-Za-z0-9_-]`, func(c *ClusterConfig) { c.NodeID = "a.b" }},
		{"node id a wildcard", `node id "*"`, func(c *ClusterConfig) { c.NodeID = "*" }},
		{"node id a full wildcard", `node id ">"`, func(c *ClusterConfig) { c.NodeID = ">" }},
		{"node id with a space", `node id "node 1"`, func(c *ClusterConfig) { c.NodeID = "node 1" }},
		{"node id too long", `node id "aaaa`, func(c *ClusterConfig) { c.NodeID = strings.Repeat("a", 64) }},
		{"NATS over http", `NATS URL "http://127.0.0.1:4222": want nats://HOST:PORT`, func(c *ClusterConfig) { c.NATS = "http://127.0.0.1:4222" }},
		{"NATS without host", `NATS URL "nats://:4222": no host`, func(c *ClusterConfig) { c.NATS = "nats://:4222" }},
		{"NATS port out of range", `port 99999: want 1-65535`, func(c *ClusterConfig) { c.NATS = "nats://u:" + secret + "@h:99999" }},
		{"NATS list of commas", `NATS URL list ", ,": no URL in it`, func(c *ClusterConfig) { c.NATS = ", ," }},
		{"NATS list with a bad second URL", `NATS URL "http://u:xxxxx@h2:4222/?token=REDACTED": want nats://HOST:PORT`,
			func(c *ClusterConfig) {
				c.NATS = "nats://h1:4222, http://u:" + secret + "@h2:4222/?token=" + secret + ",nats://h3"
			}},
		{"NATS password that does not parse", `NATS URL "nats://xxxxx@h:4222": does not parse`, func(c *ClusterConfig) { c.NATS = "nats://u:" + secret + "%zz@h:4222" }},
		{"NATS token, second of a list", `NATS URL "nats://xxxxx@h2:0"`, func(c *ClusterConfig) { c.NATS = "nats://h1:4222,nats://" + secret + "@h2:0" }},
		{"advertise garbage", `advertised address "not an address": want HOST:PORT`, func(c *ClusterConfig) { c.Address = "not an address" }},
		{"advertise without port", `advertised address "10.0.0.1"`, func(c *ClusterConfig) { c.Address = "10.0.0.1" }},
		{"advertise bad port", `port "0": want 1-65535`, func(c *ClusterConfig) { c.Address = "10.0.0.1:0" }},
		{"NATS ping negative", `NATS ping interval -1s, max pings outstanding 0: want 0 (the default) or more`, func(c *ClusterConfig) { c.NATSPingInterval = -time.Second }},
		{"NATS max pings negative", `max pings outstanding -2: want 0 (the default) or more`, func(c *ClusterConfig) { c.NATSMaxPingsOut = -2 }},
		{"drain grace negative", `drain grace -1s: want 0 or more`, func(c *ClusterConfig) { c.DrainGrace = -time.Second }},
		{"node id without cluster mode", `node id "a": a node id is for cluster mode`, func(c *ClusterConfig) { c.NATS = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			dir := filepath.Join(t.TempDir(), "data")
			_, err := New(context.Background(), Config{DataDir: dir, Cluster: cfg, Store: StoreConfig{URL: "postgres://u:" + secret + "@127.0.0.1:1/db"}})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), secret)
			assert.NoDirExists(t, dir)
		})
	}
	for _, ok := range []string{"node-1.example.com:8700", "https://node-1.example.com", "[::1]:8700"} {
		assert.NoError(t, cluster.CheckAddress(ok), ok)
	}
	for _, ok := range []string{"127.0.0.1:4222", "nats://a:4222, nats://b:4222,", "tls://u:p@a", "ws://a:8080"} {
		assert.NoError(t, cluster.CheckNATS(ok), "nats.go takes %q", ok)
	}
}

// A store or NATS that cannot be reached fails the start naming it, with
// its password or token hidden.
func TestUnreachableStoreAndNATSFailWithoutTheirSecrets(t *testing.T) {
	const secret = "s3cretpw"
	tc := newTestCluster(t)
	for _, nats := range []string{"nats://u:" + secret + "@127.0.0.1:1,nats://u:" + secret + "@127.0.0.1:2", "nats://" + secret + "@127.0.0.1:1"} {
		_, err := tc.newNode("a", func(c *Config) { c.Cluster.NATS = nats })
		require.Error(t, err)
		assert.Contains(t, err.Error(), "cluster: NATS nats://")
		assert.NotContains(t, err.Error(), secret)
	}
	for _, url := range []string{"postgres://u:" + secret + "@127.0.0.1:1/db", "postgres://u:" + secret + "@127.0.0.1:99999/db",
		"postgres://u:" + secret + "%zz@127.0.0.1/db", "postgres://u@127.0.0.1:1/db?password=" + secret} {
		_, err := New(context.Background(), Config{DataDir: t.TempDir(), Store: StoreConfig{URL: url}})
		require.Error(t, err)
		assert.NotContains(t, err.Error(), secret, url)
	}
}
