package api

import "time"

// Cluster is the body of GET /api/cluster: the nodes of the cluster the
// answering node belongs to, and which node holds each device's link.
// A single node answers with Node "" and no nodes.
type Cluster struct {
	// Node is the node that answered.
	Node string `json:"node"`
	// Version is its inter-node protocol version.
	Version int           `json:"version"`
	Nodes   []ClusterNode `json:"nodes"`
	Leases  []DeviceLease `json:"leases"`
}

// ClusterNode is a node that has joined the cluster, as its lease says.
type ClusterNode struct {
	ID string `json:"id"`
	// Epoch counts the processes that have held the node id.
	Epoch   int64  `json:"epoch"`
	Version int    `json:"version"`
	Address string `json:"address"`
	// State is up, draining or gone.
	State       string    `json:"state"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	// Alive: not gone, and heard from within the time after which a node
	// is taken as dead.
	Alive bool `json:"alive"`
	// Compatible: it speaks the answering node's protocol version; a node
	// that does not is ignored by it.
	Compatible bool `json:"compatible"`
	// Devices are those whose link it holds, by id.
	Devices []string `json:"devices"`
}

// DeviceLease is which node holds a device's link, under the lease's
// fencing epoch.
type DeviceLease struct {
	DeviceID  string    `json:"device_id"`
	NodeID    string    `json:"node_id"`
	NodeEpoch int64     `json:"node_epoch"`
	Epoch     int64     `json:"epoch"`
	TakenAt   time.Time `json:"taken_at"`
	// HolderAlive: the holding node, at that epoch, is alive.
	HolderAlive bool `json:"holder_alive"`
}
