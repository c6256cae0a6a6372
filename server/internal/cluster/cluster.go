// Package cluster is an aip-server node's membership of a cluster: its
// lease on its node id in PostgreSQL, renewed by heartbeats on
// PostgreSQL's clock; the other nodes, the deaths among them and their
// inter-node protocol versions; and the node's NATS connection, which
// carries everything between nodes. See RATIONALE.md
// beside this file.
package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/nats-io/nats.go"
)

// ProtocolVersion is the version of what nodes say to each other over
// NATS. A node ignores a node of another version, logging both, and
// refuses its messages.
const ProtocolVersion = 1

// The defaults of Config's timing: a node heartbeats every 2 s and is
// dead once not heard from for 6 s, so that the others notice a death
// within 10 s (6 s, plus up to a heartbeat before the death, plus up to
// a sweep after).
const (
	DefaultHeartbeat = 2 * time.Second
	DefaultDeadAfter = 6 * time.Second
)

// The defaults of Config's NATS pings: a node pings NATS every 4 s and
// takes its connection as dead when a ping finds two unanswered, so that
// a link that silently drops every packet is noticed within 12 s
// ((DefaultNATSMaxPingsOut + 1) × DefaultNATSPingInterval). nats.go's own,
// 2 minutes × 2, left cross-node commands hanging until their timeouts.
const (
	DefaultNATSPingInterval = 4 * time.Second
	DefaultNATSMaxPingsOut  = 2
)

// Config is what a node joins a cluster with.
type Config struct {
	// NATS is the NATS server's URL, or several, comma-separated; each
	// may carry credentials (nats://USER:PASSWORD@HOST, nats://TOKEN@HOST)
	// and ask for TLS (tls://HOST).
	NATS string
	// NATSCA, if set, is a PEM file of the CAs the NATS server's
	// certificate must chain to, instead of the system's; it implies TLS.
	NATSCA string
	// NodeID names the node; required.
	NodeID string
	// Address is where the node serves, for GET /api/cluster.
	Address string
	// Store is the shared store, on PostgreSQL.
	Store  *store.Store
	Logger *slog.Logger
	// Heartbeat and DeadAfter: see DefaultHeartbeat. Tests shorten them.
	Heartbeat, DeadAfter time.Duration
	// PingInterval and MaxPingsOut: see DefaultNATSPingInterval.
	PingInterval time.Duration
	MaxPingsOut  int
}

// Node is a node of the cluster as its lease says.
type Node struct {
	ID string
	// Epoch counts the processes that have held the id: each start that
	// takes it over from a dead one adds one.
	Epoch       int64
	Version     int
	Address     string
	State       string // store.NodeUp, NodeDraining or NodeGone
	StartedAt   time.Time
	HeartbeatAt time.Time
	// Alive: not gone and heard from within DeadAfter.
	Alive bool
	// Compatible: it speaks this node's ProtocolVersion.
	Compatible bool
}

// Cluster is this node's membership, from Join until Close.
type Cluster struct {
	cfg   Config
	log   *slog.Logger
	drops *dropLog // the messages from other nodes dropped or refused
	nc    *nats.Conn

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once

	lease *ownLease // lease.go
	warn  *incompatibles

	mu       sync.Mutex
	onDead   []func(nodeID string, epoch int64)
	deaths   []Node // announced before any OnDead handler was set
	natsLost error  // why the NATS connection was last lost
	onNATS   []func(lost error)
	// live are the nodes at the last sweep.
	live map[string]liveNode
}

// liveNode is a node as the last sweep saw it: its epoch, whether it
// was alive and compatible, and whether it was gone (fenced, or left).
type liveNode struct {
	epoch      int64
	live, gone bool
}

// validNodeID is what a node id may be: it is a NATS subject token.
var validNodeID = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_-]{0,62}$`)

// Join connects to NATS and takes the lease on cfg.NodeID, then keeps it
// with heartbeats until Close. It fails, having written nothing, if NATS
// cannot be reached; and with store.ErrNodeLive if a live node holds the
// id. A node whose id was held by a node that died takes it over at the
// next epoch, and announces that death to its own OnDead handlers.
func Join(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.Heartbeat = cmp.Or(cfg.Heartbeat, DefaultHeartbeat)
	cfg.DeadAfter = cmp.Or(cfg.DeadAfter, DefaultDeadAfter)
	cfg.PingInterval = cmp.Or(cfg.PingInterval, DefaultNATSPingInterval)
	cfg.MaxPingsOut = cmp.Or(cfg.MaxPingsOut, DefaultNATSMaxPingsOut)
	if err := errors.Join(CheckNodeID(cfg.NodeID), CheckNATS(cfg.NATS)); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if cfg.Store.Backend() != store.Postgres {
		return nil, fmt.Errorf("cluster: store is %s: %w (--store postgres://…)", cfg.Store.Backend(), store.ErrNeedsPostgres)
	}
	log := cfg.Logger.With("node", cfg.NodeID)
	c := &Cluster{cfg: cfg, log: log, drops: newDropLog(log), stop: make(chan struct{}), done: make(chan struct{}),
		lease: &ownLease{cfg: cfg, log: log}, warn: &incompatibles{log: log, warned: map[string]bool{}}}
	nc, err := c.connect()
	if err != nil {
		return nil, err
	}
	c.nc = nc
	prev, err := c.lease.join(ctx)
	if err != nil {
		nc.Close()
		if errors.Is(err, store.ErrNodeLive) {
			return nil, fmt.Errorf("cluster: %w; if that node is dead, it is taken as dead %s after its last heartbeat: start this one again then", err, cfg.DeadAfter)
		}
		return nil, fmt.Errorf("cluster: join as node %q: %w", cfg.NodeID, err)
	}
	if prev > 0 {
		c.log.Warn("took over the node id of a dead process of it", "dead_epoch", prev, "epoch", c.lease.current())
		c.deaths = append(c.deaths, Node{ID: cfg.NodeID, Epoch: prev})
	}
	c.log.Info("joined the cluster", "epoch", c.lease.current(), "nats", RedactNATS(nc.ConnectedUrl()), "protocol", ProtocolVersion)
	if err := on[Beat](c, beatSubject, c.lease.peerBeat); err != nil {
		nc.Close()
		return nil, err
	}
	c.readLive(ctx)
	go c.run()
	return c, nil
}

// Self is this node's id and epoch.
func (c *Cluster) Self() (id string, epoch int64) { return c.cfg.NodeID, c.lease.current() }

// Conn is the node's NATS connection.
func (c *Cluster) Conn() *nats.Conn { return c.nc }

// OnDead calls fn, in a goroutine of its own, with each node found dead
// from now on (not heard from within DeadAfter): on exactly one node of
// the cluster, the one whose sweep marked it gone, or, for a node that
// died and was started again before any sweep, on the new process of it,
// which took its id over. Deaths found before the first handler is set
// are delivered to it. A node that stops cleanly (Close) is not
// announced: it marks itself gone. A death whose announcer dies before it
// acts stays marked gone in cluster_nodes, for whoever sweeps after it.
func (c *Cluster) OnDead(fn func(nodeID string, epoch int64)) {
	c.mu.Lock()
	c.onDead = append(c.onDead, fn)
	pending := c.deaths
	c.deaths = nil
	c.mu.Unlock()
	for _, n := range pending {
		go fn(n.ID, n.Epoch)
	}
}

// announce hands the deaths of nodes to the OnDead handlers.
func (c *Cluster) announce(dead []Node) {
	c.mu.Lock()
	handlers := c.onDead
	if len(handlers) == 0 {
		c.deaths = append(c.deaths, dead...)
	}
	c.mu.Unlock()
	for _, n := range dead {
		c.log.Warn("node found dead", "dead_node", n.ID, "dead_epoch", n.Epoch, "after", c.cfg.DeadAfter)
		for _, fn := range handlers {
			go fn(n.ID, n.Epoch)
		}
	}
}

// Health is "" while the node holds its lease and NATS, else why not.
func (c *Cluster) Health() string {
	c.mu.Lock()
	natsLost := c.natsLost
	c.mu.Unlock()
	doubt, beatErr := c.lease.doubt(), c.lease.lastErr()
	switch {
	case doubt != "":
		return doubt
	case !c.nc.IsConnected() && natsLost != nil:
		return fmt.Sprintf("NATS: not connected (%s, lost: %v); cross-node work is refused", c.nc.Status(), natsLost)
	case !c.nc.IsConnected():
		return fmt.Sprintf("NATS: not connected (%s); cross-node work is refused", c.nc.Status())
	case beatErr != nil:
		return fmt.Sprintf("cluster: heartbeat failed: %v", beatErr)
	}
	return ""
}

// Live lists the nodes alive and of this node's protocol version, this
// one included; each node of another version is logged once.
func (c *Cluster) Live(ctx context.Context) ([]Node, error) {
	all, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	live := all[:0]
	for _, n := range all {
		if n.Alive && n.Compatible {
			live = append(live, n)
		}
	}
	return live, nil
}

// Nodes lists every node that has joined, by id, dead and incompatible
// ones included; each live node of another version is logged once.
func (c *Cluster) Nodes(ctx context.Context) ([]Node, error) {
	rows, err := c.cfg.Store.Cluster().Nodes(ctx, c.cfg.DeadAfter)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	out := make([]Node, len(rows))
	for i, r := range rows {
		out[i] = Node{ID: r.ID, Epoch: r.Epoch, Version: r.Version, Address: r.Address, State: r.State,
			StartedAt: r.StartedAt, HeartbeatAt: r.HeartbeatAt, Alive: r.Alive, Compatible: r.Version == ProtocolVersion}
		if out[i].Alive && !out[i].Compatible {
			c.warn.node(out[i])
		}
	}
	return out, nil
}

// incompatibles are the live nodes of another protocol version logged.
type incompatibles struct {
	log    *slog.Logger
	mu     sync.Mutex
	warned map[string]bool // by id/epoch
}

// node logs, once per process of it, a live node n that speaks another
// inter-node protocol version.
func (w *incompatibles) node(n Node) {
	key := fmt.Sprintf("%s/%d", n.ID, n.Epoch)
	w.mu.Lock()
	first := !w.warned[key]
	w.warned[key] = true
	w.mu.Unlock()
	if first {
		w.log.Error(fmt.Sprintf("node %q speaks inter-node protocol version %d, this node %d: it is ignored", n.ID, n.Version, ProtocolVersion),
			"peer", n.ID, "peer_epoch", n.Epoch, "peer_version", n.Version, "version", ProtocolVersion)
	}
}

// run heartbeats and sweeps for dead nodes every Heartbeat until Close.
func (c *Cluster) run() {
	defer close(c.done)
	t := time.NewTicker(c.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.tick()
		}
	}
}

// sweep marks gone the nodes not heard from within DeadAfter, and
// announces those this node marked.
func (c *Cluster) sweep(ctx context.Context) {
	var dead []store.ClusterNode
	err := c.cfg.Store.Write(ctx, func(tx *store.Tx) (err error) {
		dead, err = tx.Cluster().MarkDeadNodes(c.cfg.DeadAfter)
		return err
	})
	if err != nil {
		c.log.Warn("sweep for dead nodes failed", "err", err)
		return
	}
	nodes := make([]Node, len(dead))
	for i, d := range dead {
		nodes[i] = Node{ID: d.ID, Epoch: d.Epoch, Version: d.Version, Address: d.Address, State: d.State}
	}
	if len(nodes) > 0 {
		c.announce(nodes)
	}
	c.readLive(ctx)
}

// readLive notes which nodes are alive and compatible now, for IsLive.
func (c *Cluster) readLive(ctx context.Context) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		c.log.Debug("nodes not read", "err", err)
		return
	}
	live := make(map[string]liveNode, len(nodes))
	for _, n := range nodes {
		live[n.ID] = liveNode{epoch: n.Epoch, live: n.Alive && n.Compatible, gone: n.State == store.NodeGone}
	}
	c.mu.Lock()
	c.live = live
	c.mu.Unlock()
}

// IsLive reports whether node id was alive, and of this node's protocol
// version, at the last sweep (every heartbeat), or joined since: for what
// may be a few seconds stale, such as a device's online flag; decisions
// read the store.
func (c *Cluster) IsLive(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, seen := c.live[id]
	return n.live || !seen
}

// notLive is why node id at epoch no longer holds its lease as of the
// last sweep: gone (fenced, or left), an id a later process took over,
// or no node's; "" if it holds it, or joined since. A node only late
// with its heartbeats holds it until a sweep marks it gone.
func (c *Cluster) notLive(id string, epoch int64) string {
	c.mu.Lock()
	n, seen := c.live[id]
	c.mu.Unlock()
	if !seen || epoch > n.epoch {
		// Joined since the last sweep, or never: the store says which.
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.DeadAfter/2)
		c.readLive(ctx)
		cancel()
		c.mu.Lock()
		n, seen = c.live[id]
		c.mu.Unlock()
	}
	switch {
	case !seen:
		return "no node of that id ever joined"
	case epoch > n.epoch:
		return fmt.Sprintf("node %q is at epoch %d", id, n.epoch)
	case epoch < n.epoch:
		return fmt.Sprintf("node %q is at epoch %d now", id, n.epoch)
	case n.gone:
		return "that node is gone (fenced, or it left the cluster)"
	}
	return ""
}

// Close stops heartbeating, marks the node gone (a clean stop: no node
// announces its death) and closes NATS.
func (c *Cluster) Close(ctx context.Context) (err error) {
	c.closeOnce.Do(func() {
		close(c.stop)
		<-c.done
		_, epoch := c.Self()
		err = c.cfg.Store.Write(ctx, func(tx *store.Tx) error { return tx.Cluster().LeaveNode(c.cfg.NodeID, epoch) })
		c.nc.Close()
		if err != nil {
			err = fmt.Errorf("cluster: leave: %w", err)
			return
		}
		c.log.Info("left the cluster", "epoch", epoch)
	})
	return err
}

// Lease is device id's lease, with its holder's liveness;
// store.ErrNotFound if no node ever held it.
func (c *Cluster) Lease(ctx context.Context, id string) (store.DeviceLease, error) {
	return c.cfg.Store.Cluster().DeviceLeaseOf(ctx, id, c.cfg.DeadAfter)
}

// Leases lists the leases held.
func (c *Cluster) Leases(ctx context.Context) ([]store.DeviceLease, error) {
	return c.cfg.Store.Cluster().DeviceLeases(ctx, c.cfg.DeadAfter)
}

// TakeLease makes this node the holder of device id's link, at the
// lease's next epoch, and returns the lease and the one it replaced.
func (c *Cluster) TakeLease(ctx context.Context, id string) (lease, prev store.DeviceLease, err error) {
	_, epoch := c.Self()
	err = c.cfg.Store.Write(ctx, func(tx *store.Tx) (err error) {
		lease, prev, err = tx.Cluster().TakeDeviceLease(id, c.cfg.NodeID, epoch)
		return err
	})
	return lease, prev, err
}

// ReleaseLease releases device id's lease if it is still at epoch, and
// reports whether it was.
func (c *Cluster) ReleaseLease(ctx context.Context, id string, epoch int64) (released bool, err error) {
	err = c.cfg.Store.Write(ctx, func(tx *store.Tx) (err error) {
		released, err = tx.Cluster().ReleaseDeviceLease(id, epoch)
		return err
	})
	return released, err
}

// DeadAfter is how long a node may be silent before it is dead.
func (c *Cluster) DeadAfter() time.Duration { return c.cfg.DeadAfter }
