package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/natstest"
	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fast is the timing of the tests' nodes: dead a second after the last
// heartbeat.
const (
	fastBeat = 200 * time.Millisecond
	fastDead = time.Second
)

// env is one PostgreSQL database and one NATS server, for nodes to share.
type env struct {
	t    *testing.T
	nats *natstest.Server
	url  string
}

func newEnv(t *testing.T) *env {
	return &env{t: t, nats: natstest.Start(t), url: pgtest.Shared(t).NewDatabase(t)}
}

// open opens a store of its own on the shared database, as a node does.
func (e *env) open() *store.Store {
	st, err := store.Open(context.Background(), e.url, store.Options{})
	require.NoError(e.t, err)
	e.t.Cleanup(func() { st.Close() })
	return st
}

func (e *env) join(id string) (*Cluster, error) {
	c, err := Join(context.Background(), Config{NATS: e.nats.URL(), NodeID: id, Address: id + ":8700", Store: e.open(),
		Heartbeat: fastBeat, DeadAfter: fastDead})
	if err == nil {
		e.t.Cleanup(func() { c.Close(context.Background()) })
	}
	return c, err
}

func (e *env) mustJoin(id string) *Cluster {
	c, err := e.join(id)
	require.NoError(e.t, err)
	return c
}

// die stops c as a crash would: no more heartbeats, no leaving.
func (c *Cluster) die() {
	c.closeOnce.Do(func() {
		close(c.stop)
		<-c.done
		c.nc.Close()
	})
}

func ids(nodes []Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.ID)
	}
	return out
}

func TestNodesSeeEachOtherAndADuplicateLiveIDIsRefused(t *testing.T) {
	e := newEnv(t)
	a, b := e.mustJoin("a"), e.mustJoin("b")
	id, epoch := a.Self()
	assert.Equal(t, "a", id)
	assert.Equal(t, int64(1), epoch)
	live, err := b.Live(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b"}, ids(live))
	assert.Equal(t, "a:8700", live[0].Address)
	assert.Empty(t, a.Health())

	time.Sleep(3 * fastBeat) // past a heartbeat: "a" is still live
	_, err = e.join("a")
	require.ErrorIs(t, err, store.ErrNodeLive)
	assert.Contains(t, err.Error(), `node "a"`)
	assert.Contains(t, err.Error(), "epoch 1 at a:8700")
}

// A node that stops heartbeating is found dead within DeadAfter and a
// sweep, announced on exactly one survivor, and its id can be taken over
// at the next epoch. One that leaves cleanly is not announced.
func TestADeadNodeIsAnnouncedOnceAndItsIDTakenOver(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var heard []string
	nodes := []*Cluster{e.mustJoin("a"), e.mustJoin("b"), e.mustJoin("c")}
	for _, n := range nodes[1:] {
		n.OnDead(func(id string, epoch int64) {
			mu.Lock()
			defer mu.Unlock()
			self, _ := n.Self()
			heard = append(heard, self+" heard "+id)
			assert.Equal(t, int64(1), epoch)
		})
	}
	start := time.Now()
	nodes[0].die()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(heard) > 0 }, 5*time.Second, 10*time.Millisecond)
	t.Logf("found dead after %s", time.Since(start))
	time.Sleep(5 * fastBeat)
	mu.Lock()
	assert.Len(t, heard, 1, "one survivor announces it: %v", heard)
	mu.Unlock()
	live, err := nodes[1].Live(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "c"}, ids(live))

	again := e.mustJoin("a")
	_, epoch := again.Self()
	assert.Equal(t, int64(2), epoch)

	require.NoError(t, nodes[2].Close(context.Background()))
	time.Sleep(5 * fastBeat)
	mu.Lock()
	assert.Len(t, heard, 1, "a clean stop is not a death: %v", heard)
	mu.Unlock()
	all, err := again.Nodes(context.Background())
	require.NoError(t, err)
	require.Len(t, all, 3)
	assert.Equal(t, store.NodeGone, all[2].State)
	assert.False(t, all[2].Alive)
}

// A process that takes over the id of one that died before any sweep
// marked it announces that death itself, to its own handler.
func TestTakingOverADeadIDAnnouncesItsDeath(t *testing.T) {
	e := newEnv(t)
	old := e.mustJoin("a")
	old.die()
	time.Sleep(fastDead + fastBeat)
	next := e.mustJoin("a")
	got := make(chan int64, 1)
	next.OnDead(func(id string, epoch int64) {
		assert.Equal(t, "a", id)
		got <- epoch
	})
	select {
	case epoch := <-got:
		assert.Equal(t, int64(1), epoch)
	case <-time.After(5 * time.Second):
		t.Fatal("the death of epoch 1 was never announced")
	}
}

// A node whose lease was marked gone while it was silent (a long pause)
// learns it at its next heartbeat, and says so in its health until it
// rejoins.
func TestANodeFoundDeadLosesItsLease(t *testing.T) {
	e := newEnv(t)
	a := e.mustJoin("a")
	b := e.mustJoin("b")
	b.OnDead(func(string, int64) {})
	st := e.open()
	require.NoError(t, st.Write(context.Background(), func(tx *store.Tx) error {
		_, err := tx.Cluster().MarkDeadNodes(-time.Hour) // every node's heartbeat is "old": as after a pause
		return err
	}))
	require.Eventually(t, func() bool { return strings.Contains(a.Health(), `node "a" lost its lease (epoch 1)`) }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { _, epoch := a.Self(); return epoch == 2 && a.Health() == "" }, 5*time.Second, 10*time.Millisecond,
		"it rejoins at the next epoch by itself")
}

func TestANodeOfAnotherProtocolVersionIsIgnored(t *testing.T) {
	e := newEnv(t)
	a := e.mustJoin("a")
	require.NoError(t, e.open().Write(context.Background(), func(tx *store.Tx) error {
		_, _, err := tx.Cluster().JoinNode("future", ProtocolVersion+1, "future:8700", time.Minute)
		return err
	}))
	live, err := a.Live(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, ids(live))
	all, err := a.Nodes(context.Background())
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.False(t, all[1].Compatible)
	assert.Equal(t, ProtocolVersion+1, all[1].Version)
}

func TestJoinFailsClearly(t *testing.T) {
	e := newEnv(t)
	_, err := Join(context.Background(), Config{NATS: "nats://127.0.0.1:1", NodeID: "a", Store: e.open()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cluster: NATS nats://127.0.0.1:1: ")

	lite, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"), store.Options{})
	require.NoError(t, err)
	defer lite.Close()
	_, err = Join(context.Background(), Config{NATS: e.nats.URL(), NodeID: "a", Store: lite})
	require.ErrorIs(t, err, store.ErrNeedsPostgres)
	assert.Contains(t, err.Error(), "store is sqlite")

	_, err = Join(context.Background(), Config{NATS: e.nats.URL(), NodeID: "a.b", Store: e.open()})
	assert.ErrorContains(t, err, `node id "a.b"`)
}

// A node answers a message of another inter-node protocol version with
// a refusal naming both versions, and runs nothing; one of its own it
// serves, for a device id with a '.' in it too.
func TestAMessageOfAnotherProtocolVersionIsRefused(t *testing.T) {
	e := newEnv(t)
	a, b := e.mustJoin("a"), e.mustJoin("b")
	served := 0
	stop, err := a.ServeDevice("kiosk.1", func(cmd Command) Reply { served++; return Reply{Outcome: Sent} })
	require.NoError(t, err)
	defer stop()

	m := nats.NewMsg(deviceSubject("kiosk.1"))
	m.Header.Set(versionHeader, strconv.Itoa(ProtocolVersion+1))
	m.Data = []byte(`{"device_id": "kiosk.1"}`)
	resp, err := b.nc.RequestMsg(m, 5*time.Second)
	require.NoError(t, err)
	var r Reply
	require.NoError(t, json.Unmarshal(resp.Data, &r))
	assert.Equal(t, Failed, r.Outcome)
	assert.Contains(t, r.Error, fmt.Sprintf(`inter-node protocol version "%d", this node %d: refused`, ProtocolVersion+1, ProtocolVersion))
	assert.Zero(t, served)

	r, err = b.SendCommand(context.Background(), wellFormed("kiosk.1", "b"))
	require.NoError(t, err)
	assert.Equal(t, Sent, r.Outcome)
	assert.Equal(t, 1, served)

	_, err = b.SendCommand(context.Background(), wellFormed("kiosk-2", "b"))
	assert.ErrorIs(t, err, ErrNoHolder)
}
