package dispatch

import (
	"context"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// remote is the dispatcher's reach to devices whose links are on other
// nodes of a cluster: where such a device is, sending and stopping a
// command there, and telling the node that asked how a command it sent
// here ended. A single node's is SingleNode, which knows no other node;
// a cluster node's is its ClusterLinks (cluster_links.go,
// dispatch_remote.go). The dispatcher asks it in the places listed
// below and nowhere else.
type remote interface {
	DeviceLeases
	// leaseIfNotHere reads device id's lease from the store when neither
	// the registry nor what this node has heard places it: nil if there
	// is nothing to read, or the device is here or between links here.
	leaseIfNotHere(id string) (*store.DeviceLease, error)
	// where refines at, the registry's whereabouts of device id, with
	// what the cluster knows of it and lease; called under dispatcher.mu,
	// so that deciding where a command goes and parking it are one step.
	where(id string, at Whereabouts, lease *store.DeviceLease) Whereabouts
	// send hands cmd to node, which holds its device's link under the
	// lease epoch.
	send(cmd *Command, node string, epoch int64)
	// stop sends CANCEL_COMMAND m for device id through the node that
	// holds its link under lease.
	stop(id string, lease int64, m *protocol.ServerMessage)
	// refusedHere passes a device's refusal of a command that another
	// node sent here back to it, and reports whether rid was one.
	refusedHere(deviceID, rid, why string) bool
	// proxiedSession is the session that command rid alone makes up, for
	// a command another node sent here with it (nil if none), and whether
	// that node stopped it since, its task cancelled.
	proxiedSession(rid string) (*store.Session, func() bool)
	// recordedHere passes results recorded here to the node that sent
	// their command, if another did.
	recordedHere(rec store.Command, sessionEnded bool)
	// preparingHere passes a device's word that it prepares the tool of
	// command rid to the node that sent it here, if another did.
	preparingHere(deviceID, rid string, p protocol.Preparing)
	// unrecordedHere tells the node that sent command rid here, if
	// another did, that its device answered but the store could not
	// record the results (why); it reports whether rid was one.
	unrecordedHere(deviceID, rid, why string) bool
	// untilDoubt is ctx, ended as soon as this node doubts its cluster
	// lease, the doubt its cause; ctx itself on a single node.
	untilDoubt(ctx context.Context) (context.Context, context.CancelFunc)
}

// DeviceLeases is the device gateway's side of the cluster: the lease on
// a device that a node takes while it holds the device's link, and the
// questions the API's views ask about devices linked elsewhere. A single
// node's is singleNode: it takes no lease, and nothing is elsewhere.
type DeviceLeases interface {
	// Take takes device c's lease as it registers here; an error refuses
	// the registration.
	Take(ctx context.Context, c *Link) error
	// Announce tells the other nodes that c's link is here.
	Announce(c *Link)
	// ShutDown tells the nodes whose commands wait on device id that it
	// shut down.
	ShutDown(id string)
	// Drop stops serving device id for the other nodes, unless the lease
	// held is at epoch until or later (0: any); it returns the epoch it
	// held, or 0.
	Drop(id string, until int64) int64
	// Release gives device id's lease up, as its grace here ended.
	Release(id string)
	// HeldElsewhere: device id's lease is held by another live node.
	HeldElsewhere(id string) bool
	// AwaitedElsewhere: device id's lease is held by another node, alive,
	// or dead for less than the device grace: the device is linked there,
	// or between links until it registers on a node, and commands for it
	// wait for it.
	AwaitedElsewhere(id string) bool
	// LinkedElsewhere: this node heard that another live node holds
	// device id's link.
	LinkedElsewhere(id string) bool
	// DevicesElsewhere are the devices this node heard are linked to
	// other live nodes.
	DevicesElsewhere() []string
}

// SingleNode is the remote and the device leases of a server that is no
// node of a cluster: every device is here or nowhere.
type SingleNode struct{}

var (
	_ remote       = SingleNode{}
	_ DeviceLeases = SingleNode{}
	_ remote       = (*ClusterLinks)(nil)
	_ DeviceLeases = (*ClusterLinks)(nil)
)

func (SingleNode) leaseIfNotHere(string) (*store.DeviceLease, error)                { return nil, nil }
func (SingleNode) where(_ string, at Whereabouts, _ *store.DeviceLease) Whereabouts { return at }
func (SingleNode) send(*Command, string, int64)                                     {}
func (SingleNode) stop(string, int64, *protocol.ServerMessage)                      {}
func (SingleNode) refusedHere(string, string, string) bool                          { return false }
func (SingleNode) proxiedSession(string) (*store.Session, func() bool)              { return nil, notStopped }
func (SingleNode) recordedHere(store.Command, bool)                                 {}
func (SingleNode) preparingHere(string, string, protocol.Preparing)                 {}
func (SingleNode) unrecordedHere(string, string, string) bool                       { return false }
func (SingleNode) Take(context.Context, *Link) error                                { return nil }
func (SingleNode) Announce(*Link)                                                   {}
func (SingleNode) ShutDown(string)                                                  {}
func (SingleNode) Drop(string, int64) int64                                         { return 0 }
func (SingleNode) Release(string)                                                   {}
func (SingleNode) HeldElsewhere(string) bool                                        { return false }
func (SingleNode) AwaitedElsewhere(string) bool                                     { return false }
func (SingleNode) LinkedElsewhere(string) bool                                      { return false }
func (SingleNode) DevicesElsewhere() []string                                       { return nil }

func (SingleNode) untilDoubt(ctx context.Context) (context.Context, context.CancelFunc) {
	return ctx, func() {}
}
