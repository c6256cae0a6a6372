package server

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/cluster"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// ClusterConfig makes the server a node of a cluster: nodes that share
// one PostgreSQL store and talk over NATS (server/RATIONALE.md, "Cluster
// mode"). The zero value is a single node.
type ClusterConfig struct {
	// NATS is the NATS server's URL (nats://…; several, comma-separated):
	// set, the server is a cluster node, and needs a PostgreSQL store.
	NATS string
	// NodeID names the node among the others; default: the host's name.
	// A node refuses to start with the id of a live node.
	NodeID string
	// Address is where the node serves, as GET /api/cluster shows it.
	Address string
	// Heartbeat and DeadAfter time the node's lease (zero: 2 s and 6 s,
	// cluster.DefaultHeartbeat); tests shorten them.
	Heartbeat, DeadAfter time.Duration
}

// enabled reports whether the server is a cluster node.
func (c *ClusterConfig) enabled() bool { return c.NATS != "" }

// check refuses, before anything is written, a cluster node without a
// PostgreSQL store, and fills in the node id.
func (c *ClusterConfig) check(st StoreConfig) error {
	if !c.enabled() {
		return nil
	}
	if st.URL == "" {
		return fmt.Errorf("server: cluster mode (--nats) needs a PostgreSQL store that the nodes share (--store postgres://…); SQLite in the data dir is one node's")
	}
	if c.NodeID == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("server: node id: none given, and the host's name: %w", err)
		}
		c.NodeID = host
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
	c, err := cluster.Join(ctx, cluster.Config{NATS: s.cfg.Cluster.NATS, NodeID: s.cfg.Cluster.NodeID,
		Address: s.cfg.Cluster.Address, Store: s.store, Logger: s.log,
		Heartbeat: s.cfg.Cluster.Heartbeat, DeadAfter: s.cfg.Cluster.DeadAfter})
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.cluster = c
	return nil
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
