package server

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/cluster"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
)

// ClusterConfig makes the server a node of a cluster: nodes that share
// one PostgreSQL store and talk over NATS (internal/cluster/RATIONALE.md). The zero value is a single node.
type ClusterConfig struct {
	// NATS is the NATS server's URL (nats://…; several, comma-separated):
	// set, the server is a cluster node, and needs a PostgreSQL store.
	NATS string
	// NATSCA is a PEM file of the CAs the NATS server's certificate must
	// chain to, instead of the system's (cluster.Config.NATSCA).
	NATSCA string
	// NodeID names the node among the others; default: the host's name.
	// A node refuses to start with the id of a live node.
	NodeID string
	// Address is where the node serves, as GET /api/cluster shows it.
	Address string
	// Heartbeat and DeadAfter time the node's lease (zero: 2 s and 6 s,
	// cluster.DefaultHeartbeat); tests shorten them.
	Heartbeat, DeadAfter time.Duration
	// NATSPingInterval and NATSMaxPingsOut: the node pings NATS every
	// NATSPingInterval and takes its connection as dead, refusing
	// cross-node work until it connects again, when a ping finds
	// NATSMaxPingsOut unanswered (zero: 4 s and 2, a dead link noticed
	// within 12 s; cluster.DefaultNATSPingInterval).
	NATSPingInterval time.Duration
	NATSMaxPingsOut  int
	// DrainGrace is how long a draining node lets its tasks finish
	// (Drain), as --drain-grace gives it; checked, not used, by New.
	DrainGrace time.Duration
}

// The defaults of ClusterConfig's NATS pings, for flags.
const (
	DefaultNATSPingInterval = cluster.DefaultNATSPingInterval
	DefaultNATSMaxPingsOut  = cluster.DefaultNATSMaxPingsOut
)

// enabled reports whether the server is a cluster node.
func (c *ClusterConfig) enabled() bool { return c.NATS != "" }

// check refuses, before anything is written, a cluster node without a
// PostgreSQL store, and fills in the node id.
func (c *ClusterConfig) check(st StoreConfig) error {
	if !c.enabled() {
		if c.NodeID != "" {
			return fmt.Errorf("server: node id %.80q: a node id is for cluster mode, which --nats turns on", c.NodeID)
		}
		return nil
	}
	if st.URL == "" {
		return fmt.Errorf("server: cluster mode (--nats) needs a PostgreSQL store that the nodes share (--store postgres://…); SQLite in the data dir is one node's")
	}
	if err := cluster.CheckNATS(c.NATS); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if c.NodeID == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("server: node id: none given, and the host's name: %w", err)
		}
		if err := cluster.CheckNodeID(host); err != nil {
			return fmt.Errorf("server: %w: it is the host's name; give one (--node-id)", err)
		}
		c.NodeID = host
	}
	if err := cluster.CheckNodeID(c.NodeID); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if c.Address != "" {
		if err := cluster.CheckAddress(c.Address); err != nil {
			return fmt.Errorf("server: advertised %w", err)
		}
	}
	if c.DrainGrace < 0 {
		return fmt.Errorf("server: drain grace %s: want 0 or more", c.DrainGrace)
	}
	if c.NATSPingInterval < 0 || c.NATSMaxPingsOut < 0 {
		return fmt.Errorf("server: NATS ping interval %s, max pings outstanding %d: want 0 (the default) or more", c.NATSPingInterval, c.NATSMaxPingsOut)
	}
	return nil
}

// joinCluster makes the server a node of the cluster, if it is
// configured to be one.
func (s *Server) joinCluster(ctx context.Context) error {
	if !s.cfg.Cluster.enabled() {
		return nil
	}
	if s.store.Backend() != store.Postgres {
		return fmt.Errorf("server: cluster mode needs a PostgreSQL store, not %s", s.store.Backend())
	}
	c, err := cluster.Join(ctx, cluster.Config{NATS: s.cfg.Cluster.NATS, NATSCA: s.cfg.Cluster.NATSCA, NodeID: s.cfg.Cluster.NodeID,
		Address: s.cfg.Cluster.Address, Store: s.store, Logger: s.log,
		Heartbeat: s.cfg.Cluster.Heartbeat, DeadAfter: s.cfg.Cluster.DeadAfter,
		PingInterval: s.cfg.Cluster.NATSPingInterval, MaxPingsOut: s.cfg.Cluster.NATSMaxPingsOut})
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.cluster = c
	return nil
}

// linkCluster wires a cluster node's parts to the other nodes: commands
// for devices linked elsewhere, the commands and changes other nodes send.
func (s *Server) linkCluster() error {
	if s.cluster == nil {
		return nil
	}
	if _, err := dispatch.NewClusterLinks(s.cluster, s.reg, s.disp, s.cfg.Sessions.DeviceGrace, s.log); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.admission.Reachable = s.reachable
	err := s.cluster.OnRevocation(func(r cluster.Revocation) { s.Revoked(Revocation{Identity: r.Identity, TokenIDs: r.TokenIDs}) })
	if err == nil {
		err = s.cluster.OnDeviceEvent(s.deviceEvent)
	}
	if err == nil {
		s.tasks.CancelElsewhere = s.cluster.PublishTaskCancel
		// Cancel waits for the task's end: not on NATS's callback.
		err = s.cluster.OnTaskCancel(func(t cluster.TaskCancel) { go s.tasks.Cancel(t.ID, t.Why) })
	}
	if err == nil {
		err = s.cluster.OnRolloutEvent(s.rolloutEvent)
	}
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.cluster.OnFenced(s.closeLinksWhenFenced)
	s.cluster.OnFenced(s.rollouts.KickAll) // each gives its lead up
	return nil
}

// closeLinksWhenFenced closes every device link of a node that lost its
// lease, so that its devices register on other nodes: what it holds is
// theirs now, at higher epochs.
func (s *Server) closeLinksWhenFenced() {
	devices := s.reg.Devices()
	for _, c := range devices {
		s.reg.Disconnect(c.ID, "this node lost its cluster lease: connect to another node")
	}
	s.log.Error("cluster: lost this node's lease; closed its device links", "devices", len(devices))
}

// deviceEvent acts on a change another node made to a device.
func (s *Server) deviceEvent(e cluster.DeviceEvent) {
	switch e.What {
	case cluster.DeviceRevoked:
		s.deviceRevoked(e.DeviceID)
		s.log.Info("device revoked on another node", "device", e.DeviceID, "node", e.From)
	case cluster.DeviceChanged:
		s.devices.Forget(e.DeviceID)
		s.mcp.DevicesChanged()
		s.rollouts.KickAll()
	case cluster.DeviceRotate:
		s.ws.OfferRotationTo(context.Background(), e.DeviceID)
	case cluster.DeviceRotationSettled:
		s.auth.SettledElsewhere(e.DeviceID)
	}
}

// tellCluster tells the other nodes, if any, of a change to device id
// made here (what: cluster.DeviceRevoked, …).
func (s *Server) tellCluster(id, what string) {
	if s.cluster == nil {
		return
	}
	if err := s.cluster.PublishDeviceEvent(cluster.DeviceEvent{DeviceID: id, What: what}); err != nil {
		s.log.Error("cluster: other nodes not told of a change to a device", "device", id, "change", what, "err", err)
	}
}

// leaveCluster leaves the cluster, if the server is a node: the node's
// lease is marked gone, as a clean stop.
func (s *Server) leaveCluster() {
	if s.cluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.cluster.Close(ctx); err != nil {
		s.log.Warn("cluster: leaving", "err", err)
	}
}

// clusterHealth is why the node is degraded as a cluster node, or "".
func (s *Server) clusterHealth() string {
	if s.cluster == nil {
		return ""
	}
	return s.cluster.Health()
}

// reachable refuses, with a *tasks.Unreachable, work for any of devices
// not linked, nor between links, here while NATS, which would carry it
// to their nodes, is away: 503. The devices linked here are still served.
func (s *Server) reachable(devices []string) error {
	if doubt := s.cluster.LeaseDoubt(); doubt != "" {
		return tasks.InDoubt(doubt)
	}
	if s.cluster.Connected() {
		return nil
	}
	for _, id := range devices {
		if at := s.reg.Reach(id); at.Link == nil && at.GraceLeft == 0 {
			return &tasks.Unreachable{Reason: fmt.Sprintf("device %q is not linked to node %q, and cross-node work is refused: %s",
				id, s.cfg.Cluster.NodeID, s.cluster.Health())}
		}
	}
	return nil
}
