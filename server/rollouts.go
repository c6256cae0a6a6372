package server

import (
	"context"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/cluster"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/rollouts"
	"github.com/edgeaip/edgeaip/server/metrics"
)

// newRollouts is the rollouts engine of s: each device's change runs
// through the front door, on the node that holds its link.
func (s *Server) newRollouts() *rollouts.Engine {
	return rollouts.New(rollouts.Config{
		Store: s.store, Tasks: s.tasks, Options: s.cfg.Rollouts, Logger: s.log.With("part", "rollouts"),
		Matching: func(ctx context.Context, sel access.Selector) ([]string, error) {
			return s.store.Devices().Matching(ctx, sel, 0)
		},
		Online:    s.online,
		Inventory: s.inventory,
		Node:      s.rolloutNode(),
	})
}

// rolloutNode is s as a node that leads rollouts, in a cluster; nil on a
// single node.
func (s *Server) rolloutNode() rollouts.Node {
	if s.cluster == nil {
		return nil
	}
	return rolloutNode{s}
}

// rolloutNode is a cluster node as the rollouts' engine sees it.
type rolloutNode struct{ s *Server }

// Self is the node's id and the epoch of its lease.
func (n rolloutNode) Self() (string, int64) { return n.s.cluster.Self() }

// Doubt is why the node may lead no rollout now: it is not sure of its
// lease, or it drains (it would refuse the changes' tasks).
func (n rolloutNode) Doubt() string {
	if doubt := n.s.cluster.LeaseDoubt(); doubt != "" {
		return doubt
	}
	if n.s.draining.Load() {
		return "this node drains"
	}
	return ""
}

// Announce tells the other nodes that rollout name changed here.
func (n rolloutNode) Announce(name string) {
	n.s.tellRollouts(cluster.RolloutEvent{Rollout: name})
}

// tellRollouts tells the other nodes, if any, what their rollouts'
// leaders must hear.
func (s *Server) tellRollouts(e cluster.RolloutEvent) {
	if s.cluster == nil {
		return
	}
	if err := s.cluster.PublishRolloutEvent(e); err != nil {
		s.log.Warn("cluster: other nodes not told of a change for rollouts; their sweep finds it", "rollout", e.Rollout, "device", e.DeviceID, "err", err)
	}
}

// deviceRegistered tells the rollouts, here and on the other nodes, that
// device id registered here: their leaders bring it to their revisions,
// and a change waiting for its report goes on.
func (s *Server) deviceRegistered(id string) {
	s.rollouts.Registered(id)
	s.tellRollouts(cluster.RolloutEvent{DeviceID: id})
}

// rolloutEvent acts on what another node told the rollouts.
func (s *Server) rolloutEvent(e cluster.RolloutEvent) {
	if e.DeviceID != "" {
		s.rollouts.Registered(e.DeviceID)
		return
	}
	s.rollouts.Kick(e.Rollout)
}

// kickStoredRollouts reconciles every rollout the store holds: a node
// died, and those it led want a leader now, not at the next sweep.
func (s *Server) kickStoredRollouts() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.rollouts.KickStored(ctx); err != nil {
		s.log.Warn("rollouts of a dead node not looked at; the sweep does", "err", err)
	}
}

// online reports whether device id is linked, here or to another node.
func (s *Server) online(id string) bool {
	return s.reg.Device(id) != nil || s.disp.Leases().LinkedElsewhere(id)
}

// inventory is device id's last registration: its link's, else the
// store's.
func (s *Server) inventory(ctx context.Context, id string) *protocol.SystemInfo {
	if c := s.reg.Device(id); c != nil {
		return c.Info.Load()
	}
	d, err := s.store.Devices().Get(ctx, id)
	if err != nil {
		return nil
	}
	return dispatch.StoredInfo(d)
}

// deviceRelabelled tells the device cache, the MCP views, the rollouts
// and the other nodes that device id's labels changed here.
func (s *Server) deviceRelabelled(id string) {
	s.devices.Forget(id)
	s.tellCluster(id, cluster.DeviceChanged)
	s.mcp.DevicesChanged()
	s.rollouts.KickAll()
}

// rolloutMetrics registers the metrics of the rollouts, which the engine
// counts in the store at each scrape.
func (s *Server) rolloutMetrics() {
	s.metrics.Rollouts(metrics.RolloutSources{
		Read: func(ctx context.Context) ([]metrics.RolloutStatus, error) {
			all, err := s.rollouts.Counts(ctx)
			out := make([]metrics.RolloutStatus, len(all))
			for i, r := range all {
				out[i] = metrics.RolloutStatus{Name: r.Name, Revision: r.Revision, State: r.State, Devices: r.Counts}
			}
			return out, err
		},
		States: api.RolloutStates, DeviceStates: api.RolloutDeviceStates,
		Failed: func(err error) {
			s.log.Warn("metrics: the rollouts were not read: their series are left out", "err", err)
		},
	})
}
