package server

import (
	"context"

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
	})
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
