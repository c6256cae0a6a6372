package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/natstest"
	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ownEnv is an env on a PostgreSQL cluster of the test's own, which it
// may stop and start.
func ownEnv(t *testing.T) (*env, *pgtest.Cluster) {
	pg := pgtest.Start(t)
	return &env{t: t, nats: natstest.Start(t), url: pg.NewDatabase(t)}, pg
}

// deaths records the deaths the nodes announce.
type deaths struct {
	mu    sync.Mutex
	heard []string
}

func (d *deaths) listen(nodes ...*Cluster) {
	for _, n := range nodes {
		n.OnDead(func(id string, _ int64) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.heard = append(d.heard, id)
		})
	}
}

func (d *deaths) list() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.heard...)
}

// When the store itself is down, no node can record a heartbeat: once it
// is back, no node is taken as dead for that, and every node serves again
// at its epoch, with no restart.
func TestAStoreOutageDeclaresNoNodeDead(t *testing.T) {
	e, pg := ownEnv(t)
	nodes := []*Cluster{e.mustJoin("a"), e.mustJoin("b"), e.mustJoin("c")}
	var d deaths
	d.listen(nodes...)

	require.NoError(t, pg.Kill())
	for _, n := range nodes {
		require.Eventually(t, func() bool { return n.LeaseDoubt() != "" }, 10*fastDead, fastBeat/4,
			"a node that records no heartbeat doubts its lease")
	}
	// Down for longer than a node may be silent.
	require.Eventually(t, func() bool {
		nodes[0].lease.mu.Lock()
		defer nodes[0].lease.mu.Unlock()
		return time.Since(nodes[0].lease.lastBeat) > 2*fastDead
	}, 20*fastDead, fastBeat/4)
	assert.Contains(t, nodes[1].LeaseDoubt(), "has recorded no heartbeat in the store for")
	require.NoError(t, pg.Start())

	for _, n := range nodes {
		require.Eventually(t, func() bool { return n.Health() == "" && n.lease.steady() }, 20*fastDead, fastBeat/4,
			"every node serves again, and has recorded heartbeats long enough to sweep")
	}
	for _, n := range nodes {
		id, epoch := n.Self()
		assert.Equal(t, int64(1), epoch, "node %s keeps its epoch", id)
	}
	live, err := nodes[0].Live(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, ids(live))
	assert.Empty(t, d.list(), "no node is taken as dead for heartbeats nobody could write")
}

// A node cut off from the store while the others are not gives its lease
// up within DeadAfter, so that its devices move; once the store is in
// reach again, it rejoins at a new epoch by itself.
func TestANodeCutOffFromTheStoreGivesUpItsLeaseAndRejoins(t *testing.T) {
	e, _ := ownEnv(t)
	e.open() // migrates the schema, on which the role is granted rights
	roleA, asA := pgtest.Role(t, e.url)
	stA, err := store.Open(context.Background(), asA, store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { stA.Close() })
	a, err := Join(context.Background(), Config{NATS: e.nats.URL(), NodeID: "a", Address: "a:8700", Store: stA,
		Heartbeat: fastBeat, DeadAfter: fastDead})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close(context.Background()) })
	b, c := e.mustJoin("b"), e.mustJoin("c")
	var d deaths
	d.listen(b, c)
	fenced := make(chan struct{}, 1)
	a.OnFenced(func() { fenced <- struct{}{} })

	pgtest.LockOut(t, e.url, roleA)
	select {
	case <-fenced:
	case <-t.Context().Done():
		t.Fatal("the node cut off never gave its lease up")
	}
	assert.Contains(t, a.LeaseDoubt(), "cut off from the store")
	require.Eventually(t, func() bool { return len(d.list()) == 1 }, 20*fastDead, fastBeat/4, "the others take it as dead")
	assert.Equal(t, []string{"a"}, d.list())

	pgtest.LetIn(t, e.url, roleA)
	require.Eventually(t, func() bool { return a.LeaseDoubt() == "" }, 20*fastDead, fastBeat/4, "it rejoins by itself")
	_, epoch := a.Self()
	assert.Equal(t, int64(2), epoch)
	live, err := b.Live(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, ids(live))
}

// A node whose writes wait (its store's writer is held: no heartbeat is
// recorded, and none fails at once) gives its lease up while the others
// record theirs, as one whose writes fail does.
func TestANodeWhoseWritesWaitGivesUpItsLease(t *testing.T) {
	e := newEnv(t)
	stA := e.open()
	a, err := Join(context.Background(), Config{NATS: e.nats.URL(), NodeID: "a", Address: "a:8700", Store: stA,
		Heartbeat: fastBeat, DeadAfter: fastDead})
	require.NoError(t, err)
	t.Cleanup(func() { a.Close(context.Background()) })
	e.mustJoin("b")
	fenced := make(chan struct{}, 1)
	a.OnFenced(func() { fenced <- struct{}{} })

	held, release := make(chan struct{}), make(chan struct{})
	go stA.Write(context.Background(), func(*store.Tx) error { close(held); <-release; return nil })
	<-held
	select {
	case <-fenced:
	case <-time.After(20 * fastDead):
		t.Fatal("the node whose writes wait did not give its lease up")
	}
	assert.Contains(t, a.LeaseDoubt(), "cut off from the store")
	close(release)
}
