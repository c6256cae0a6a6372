package server

import (
	"context"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// remote is the dispatcher's reach to devices whose links are on other
// nodes of a cluster: where such a device is, sending and stopping a
// command there, and telling the node that asked how a command it sent
// here ended. A single node's is singleNode, which knows no other node;
// a cluster node's is its clusterLinks (cluster_links.go,
// dispatch_remote.go). The dispatcher asks it in the places listed
// below and nowhere else.
type remote interface {
	// leaseIfNotHere reads device id's lease from the store when neither
	// the registry nor what this node has heard places it: nil if there
	// is nothing to read, or the device is here or between links here.
	leaseIfNotHere(id string) (*store.DeviceLease, error)
	// where refines at, the registry's whereabouts of device id, with
	// what the cluster knows of it and lease; called under dispatcher.mu,
	// so that deciding where a command goes and parking it are one step.
	where(id string, at whereabouts, lease *store.DeviceLease) whereabouts
	// send hands cmd to node, which holds its device's link under the
	// lease epoch.
	send(cmd *command, node string, epoch int64)
	// stop sends CANCEL_COMMAND m for device id through the node that
	// holds its link under lease.
	stop(id string, lease int64, m *protocol.ServerMessage)
	// refusedHere passes a device's refusal of a command that another
	// node sent here back to it, and reports whether rid was one.
	refusedHere(deviceID, rid, why string) bool
	// proxiedSession is the session that command rid alone makes up, for
	// a command another node sent here with it; nil if none.
	proxiedSession(rid string) *store.Session
	// recordedHere passes results recorded here to the node that sent
	// their command, if another did.
	recordedHere(rec store.Command, sessionEnded bool)
}

// deviceLeases is the device gateway's side of the cluster: the lease on
// a device that a node takes while it holds the device's link, and the
// questions the API's views ask about devices linked elsewhere. A single
// node's is singleNode: it takes no lease, and nothing is elsewhere.
type deviceLeases interface {
	// take takes device c's lease as it registers here; an error refuses
	// the registration.
	take(ctx context.Context, c *client) error
	// announce tells the other nodes that c's link is here.
	announce(c *client)
	// shutDown tells the nodes whose commands wait on device id that it
	// shut down.
	shutDown(id string)
	// drop stops serving device id for the other nodes, unless the lease
	// held is at epoch until or later (0: any); it returns the epoch it
	// held, or 0.
	drop(id string, until int64) int64
	// release gives device id's lease up, as its grace here ended.
	release(id string)
	// heldElsewhere: device id's lease is held by another live node.
	heldElsewhere(id string) bool
	// linkedElsewhere: this node heard that another live node holds
	// device id's link.
	linkedElsewhere(id string) bool
	// devicesElsewhere are the devices this node heard are linked to
	// other live nodes.
	devicesElsewhere() []string
}

// singleNode is the remote and the device leases of a server that is no
// node of a cluster: every device is here or nowhere.
type singleNode struct{}

var (
	_ remote       = singleNode{}
	_ deviceLeases = singleNode{}
	_ remote       = (*clusterLinks)(nil)
	_ deviceLeases = (*clusterLinks)(nil)
)

func (singleNode) leaseIfNotHere(string) (*store.DeviceLease, error)                { return nil, nil }
func (singleNode) where(_ string, at whereabouts, _ *store.DeviceLease) whereabouts { return at }
func (singleNode) send(*command, string, int64)                                     {}
func (singleNode) stop(string, int64, *protocol.ServerMessage)                      {}
func (singleNode) refusedHere(string, string, string) bool                          { return false }
func (singleNode) proxiedSession(string) *store.Session                             { return nil }
func (singleNode) recordedHere(store.Command, bool)                                 {}
func (singleNode) take(context.Context, *client) error                              { return nil }
func (singleNode) announce(*client)                                                 {}
func (singleNode) shutDown(string)                                                  {}
func (singleNode) drop(string, int64) int64                                         { return 0 }
func (singleNode) release(string)                                                   {}
func (singleNode) heldElsewhere(string) bool                                        { return false }
func (singleNode) linkedElsewhere(string) bool                                      { return false }
func (singleNode) devicesElsewhere() []string                                       { return nil }
