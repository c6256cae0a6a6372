package httpapi

import (
	"net/http"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/cluster"
)

// clusterView is GET /api/cluster: the nodes, the devices each holds and
// every device's lease.
func (h *nodeHandlers) clusterView(w http.ResponseWriter, r *http.Request) {
	out := api.Cluster{Nodes: []api.ClusterNode{}, Leases: []api.DeviceLease{}}
	if h.cluster == nil {
		writeJSON(w, http.StatusOK, out)
		return
	}
	out.Node, _ = h.cluster.Self()
	out.Version = cluster.ProtocolVersion
	nodes, err := h.cluster.Nodes(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	leases, err := h.cluster.Leases(r.Context())
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	held := map[string][]string{}
	for _, l := range leases {
		out.Leases = append(out.Leases, api.DeviceLease{DeviceID: l.DeviceID, NodeID: l.NodeID, NodeEpoch: l.NodeEpoch,
			Epoch: l.Epoch, TakenAt: l.TakenAt, HolderAlive: l.HolderAlive})
		if l.HolderAlive {
			held[l.NodeID] = append(held[l.NodeID], l.DeviceID)
		}
	}
	for _, n := range nodes {
		if held[n.ID] == nil {
			held[n.ID] = []string{}
		}
		out.Nodes = append(out.Nodes, api.ClusterNode{ID: n.ID, Epoch: n.Epoch, Version: n.Version, Address: n.Address,
			State: n.State, StartedAt: n.StartedAt, HeartbeatAt: n.HeartbeatAt, Alive: n.Alive, Compatible: n.Compatible,
			Devices: held[n.ID]})
	}
	writeJSON(w, http.StatusOK, out)
}
