package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/cluster"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/metrics"
)

// ClusterLinks is a node's part in the links of the cluster's devices
// (internal/cluster/RATIONALE.md): the leases of the devices linked
// here, the commands other nodes send for them, and the dispatcher's way
// to devices linked elsewhere: a cluster node's remote and deviceLeases
// (remote.go).
type ClusterLinks struct {
	c     *cluster.Cluster
	reg   *Registry
	disp  *Dispatcher
	grace time.Duration
	log   *slog.Logger

	// leases is the newest lease change heard of, by device; guarded by
	// disp.mu, under which the dispatcher decides where a command goes.
	leases map[string]cluster.LeaseChange

	mu sync.Mutex
	// held are the leases of the devices linked here, or between links
	// here, by device.
	held map[string]*heldLease
	// proxied are the commands other nodes sent here for devices linked
	// here, by response_id.
	proxied map[string]proxied
}

// proxied is a command another node sent here: which node, where its
// results go, and the session it alone makes up, if it does.
type proxied struct {
	from     string
	deviceID string
	session  *store.Session
	// stopped: the node that sent it stopped it since, its task
	// cancelled; shared by the copies the map holds.
	stopped *atomic.Bool
}

// heldLease is a device's lease this node holds, and the subscription
// through which other nodes send it the device's commands.
type heldLease struct {
	epoch int64
	stop  func()
}

// proxiedFor is how long a command sent here by another node is
// remembered past its timeout and the preparation bound (the asking
// node's wait may extend that long), for results that come late.
const proxiedFor = time.Minute

// noHolderRetries bounds the sends of a command to a node that does not
// answer for its device, each after reading the lease again, before the
// command waits for the device's next lease.
const noHolderRetries = 8

// NewClusterLinks links the node of c, whose devices reg holds, to the
// other nodes: disp reaches devices linked to them through what it
// returns from now on, and the gateway takes devices' leases through it.
// A device whose link drops here has grace to come back.
func NewClusterLinks(c *cluster.Cluster, reg *Registry, disp *Dispatcher, grace time.Duration, log *slog.Logger) (*ClusterLinks, error) {
	l := &ClusterLinks{c: c, reg: reg, disp: disp, grace: grace, log: log,
		leases: map[string]cluster.LeaseChange{}, held: map[string]*heldLease{}, proxied: map[string]proxied{}}
	if err := c.OnLease(l.leaseChanged); err != nil {
		return nil, err
	}
	if err := c.Returns().OnRecorded(l.recordedElsewhere); err != nil {
		return nil, err
	}
	if err := c.Returns().OnPreparing(l.preparingElsewhere); err != nil {
		return nil, err
	}
	if err := c.Returns().OnUnrecorded(func(u cluster.Unrecorded) { go disp.unrecordedElsewhere(u) }); err != nil {
		return nil, err
	}
	c.OnNATS(l.natsChanged)
	l.preload()
	disp.remote = l
	disp.metrics.Cluster(cluster.ProtocolVersion, metrics.ClusterSources{Self: c.Self, NATSConnected: c.Connected, LeasesHeld: l.heldCount})
	return l, nil
}

// preload takes the leases other live nodes hold as announced: a node
// that starts knows where every device is without a read per command.
func (l *ClusterLinks) preload() {
	ctx, cancel := context.WithTimeout(context.Background(), SendTimeout)
	defer cancel()
	leases, err := l.c.Leases(ctx)
	if err != nil {
		l.log.Warn("cluster: device leases not read; commands read them one by one", "err", err)
		return
	}
	self, _ := l.c.Self()
	for _, lease := range leases {
		if lease.HolderAlive && lease.NodeID != self {
			l.leases[lease.DeviceID] = cluster.LeaseChange{DeviceID: lease.DeviceID, NodeID: lease.NodeID, NodeEpoch: lease.NodeEpoch, Epoch: lease.Epoch}
		}
	}
}

// LinkedElsewhere reports whether device id is linked to another node
// that was alive at the last sweep, as announced: for its online flag.
func (l *ClusterLinks) LinkedElsewhere(id string) bool {
	self, _ := l.c.Self()
	l.disp.mu.Lock()
	lc := l.leases[id]
	l.disp.mu.Unlock()
	return lc.NodeID != "" && lc.NodeID != self && l.c.IsLive(lc.NodeID)
}

// DevicesElsewhere lists the devices linked to other nodes alive at the
// last sweep, as announced, sorted.
func (l *ClusterLinks) DevicesElsewhere() []string {
	self, _ := l.c.Self()
	l.disp.mu.Lock()
	var out []string
	for id, lc := range l.leases {
		if lc.NodeID != "" && lc.NodeID != self && l.c.IsLive(lc.NodeID) {
			out = append(out, id)
		}
	}
	l.disp.mu.Unlock()
	slices.Sort(out)
	return out
}

// heldCount counts the leases this node holds.
func (l *ClusterLinks) heldCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// Take makes this node the holder of device c's link, before the link is
// seen online; announce then tells the other nodes, and a node that held
// it closes its link. A node that lost its own lease (fenced) refuses the
// device, to send it to another node; without PostgreSQL the device is
// served here alone.
func (l *ClusterLinks) Take(ctx context.Context, c *Link) error {
	lease, prev, err := l.c.TakeLease(ctx, c.ID)
	switch {
	case errors.Is(err, store.ErrFenced):
		return fmt.Errorf("this node lost its cluster lease: connect to another node")
	case err != nil:
		l.log.Error("cluster: device lease not taken: the device is served by this node alone", "device", c.ID, "err", err)
		return nil
	}
	c.leaseEpoch.Store(lease.Epoch)
	l.hold(c.ID, lease.Epoch)
	if prev.Held() {
		l.log.Debug("cluster: device lease taken", "device", c.ID, "epoch", lease.Epoch, "from_node", prev.NodeID)
	}
	return nil
}

// Announce tells every node device c's lease is this node's.
func (l *ClusterLinks) Announce(c *Link) {
	if c.leaseEpoch.Load() == 0 {
		return
	}
	self, epoch := l.c.Self()
	if err := l.c.PublishLease(cluster.LeaseChange{DeviceID: c.ID, NodeID: self, NodeEpoch: epoch, Epoch: c.leaseEpoch.Load()}); err != nil {
		l.log.Warn("cluster: device lease not announced; other nodes read it from the store", "device", c.ID, "err", err)
	}
}

// hold records the lease of device id at epoch as this node's, and
// serves the commands other nodes send for it.
func (l *ClusterLinks) hold(id string, epoch int64) {
	if l.raise(id, epoch) {
		return
	}
	// Subscribed outside l.mu: it waits for NATS to confirm.
	stop, err := l.c.ServeDevice(id, l.serve)
	if err != nil {
		l.log.Error("cluster: commands for the device from other nodes cannot reach it", "device", id, "err", err)
		stop = func() {}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.held[id]; h != nil { // held meanwhile, by a registration beside this one
		h.epoch = max(h.epoch, epoch)
		stop()
		return
	}
	l.held[id] = &heldLease{epoch: epoch, stop: stop}
}

// raise sets the epoch of device id's lease held here, if it is held, to
// epoch if that is higher, and reports whether it is held.
func (l *ClusterLinks) raise(id string, epoch int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.held[id]
	if h != nil {
		h.epoch = max(h.epoch, epoch)
	}
	return h != nil
}

// Drop forgets device id's lease, if this node holds it at an epoch
// below until (0: any), and returns the epoch it held (0: none).
func (l *ClusterLinks) Drop(id string, until int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.held[id]
	if h == nil || (until > 0 && h.epoch >= until) {
		return 0
	}
	delete(l.held, id)
	h.stop()
	return h.epoch
}

// HeldEpoch is the epoch of device id's lease if this node holds it.
func (l *ClusterLinks) HeldEpoch(id string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.held[id]; h != nil {
		return h.epoch
	}
	return 0
}

// Release gives up device id's lease, its link here having ended for
// good (its grace, a revocation), and tells the other nodes.
func (l *ClusterLinks) Release(id string) {
	epoch := l.Drop(id, 0)
	if epoch == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), SendTimeout)
	defer cancel()
	released, err := l.c.ReleaseLease(ctx, id, epoch)
	switch {
	case err != nil:
		l.log.Warn("cluster: device lease not released", "device", id, "epoch", epoch, "err", err)
	case released:
		if err := l.c.PublishLease(cluster.LeaseChange{DeviceID: id, Epoch: epoch}); err != nil {
			l.log.Debug("cluster: lease release not announced", "device", id, "err", err)
		}
	}
}

// HeldElsewhere reports whether another node holds device id's lease now,
// as the store says: a grace that ends here must not end the device's
// work if the device is linked elsewhere.
func (l *ClusterLinks) HeldElsewhere(id string) bool {
	lease, ok := l.leaseElsewhere(id)
	return ok && lease.HolderAlive
}

// AwaitedElsewhere reports whether another node holds device id's lease
// as the store says, alive, or dead for less than the device grace, from
// its last heartbeat: as where sends a command there, or has it wait.
func (l *ClusterLinks) AwaitedElsewhere(id string) bool {
	lease, ok := l.leaseElsewhere(id)
	return ok && (lease.HolderAlive || lease.HolderSilent < l.grace)
}

// leaseElsewhere is device id's lease as the store has it, if a node
// other than this one holds it.
func (l *ClusterLinks) leaseElsewhere(id string) (store.DeviceLease, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), SendTimeout)
	defer cancel()
	lease, err := l.c.Lease(ctx, id)
	self, _ := l.c.Self()
	return lease, err == nil && lease.Held() && lease.NodeID != self
}

// leaseChanged hears a lease change from any node. A device this node
// held, now another's, has its link here closed and its grace here ended
// without ending its work; the commands waiting for it anywhere here go
// to its new holder.
func (l *ClusterLinks) leaseChanged(lc cluster.LeaseChange) {
	self, selfEpoch := l.c.Self()
	mine := lc.NodeID == self && lc.NodeEpoch == selfEpoch
	if !mine && lc.NodeID != "" {
		if held := l.Drop(lc.DeviceID, lc.Epoch); held > 0 {
			if c := l.reg.moved(lc.DeviceID); c != nil {
				l.log.Info("cluster: device linked to another node; closing its link here", "device", lc.DeviceID, "node", lc.NodeID, "epoch", lc.Epoch, "held_epoch", held)
				l.disp.LinkDropped(c, false)
				go c.Conn.Close(websocket.StatusPolicyViolation, fmt.Sprintf("device linked to node %s", lc.NodeID))
			}
		}
	}
	l.sendOnLeaseChange(lc, mine)
}

// serve answers a command another node sent for a device whose lease
// this node holds, by sending it on the device's link.
func (l *ClusterLinks) serve(cmd cluster.Command) cluster.Reply {
	id := cmd.DeviceID
	held := l.HeldEpoch(id)
	if held != cmd.LeaseEpoch {
		return cluster.Reply{Outcome: cluster.Stale, Lease: held}
	}
	at := l.reg.Reach(id)
	switch {
	case at.Link == nil && at.GraceLeft > 0:
		return cluster.Reply{Outcome: cluster.Between, GraceLeft: at.GraceLeft}
	case at.Link == nil && at.shutDown:
		return cluster.Reply{Outcome: cluster.Down}
	case at.Link == nil:
		return cluster.Reply{Outcome: cluster.Offline}
	}
	if cmd.Message.Type == protocol.ServerCancelCommand {
		l.stopped(cmd.Message.ResponseID)
		if err := sendCancel(at.Link, cmd.Message); err != nil {
			return cluster.Reply{Outcome: cluster.Failed, Error: err.Error()}
		}
		return cluster.Reply{Outcome: cluster.Sent}
	}
	if l.disp.IsFrozen() {
		// This node has handed its tasks off and is about to close its
		// links: the device registers elsewhere soon, and the command goes
		// to it there, not on a link about to close.
		return cluster.Reply{Outcome: cluster.Between, GraceLeft: l.grace}
	}
	if why := l.notToSend(cmd); why != "" {
		return cluster.Reply{Outcome: cluster.Failed, Error: why}
	}
	rid := cmd.Message.ResponseID
	l.mu.Lock()
	l.proxied[rid] = proxied{from: cmd.From, deviceID: id, session: cmd.Session, stopped: &atomic.Bool{}}
	l.mu.Unlock()
	time.AfterFunc(cmd.Timeout+l.disp.prepBound+proxiedFor, func() {
		l.mu.Lock()
		delete(l.proxied, rid)
		l.mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), SendTimeout)
	err := at.Link.Conn.Send(ctx, cmd.Message)
	cancel()
	switch {
	case errors.Is(err, protocol.ErrTooBig):
		size, _ := FrameSize(at.Link.Conn.Encoding(), cmd.Message)
		return cluster.Reply{Outcome: cluster.Failed, Error: FrameTooBig(size, at.Link.Conn.Encoding(), l.disp.frameCap)}
	case err != nil:
		l.log.Warn("cluster: command from another node not sent; it waits for the device to come back", "device", id, "response_id", rid, "err", err)
		return cluster.Reply{Outcome: cluster.Between, GraceLeft: l.grace}
	}
	l.log.Debug("cluster: command from another node sent", "device", id, "response_id", rid, "from", cmd.From)
	return cluster.Reply{Outcome: cluster.Sent}
}

// notToSend is why the holder must not send cmd on its device's link,
// or "": its deadline has passed (NATS held it, through a partition,
// until its sender had failed it), or the store says it has ended, or
// does not hold it (no command runs unrecorded). The sender's failure of
// a command never sent can then be relied on (server RATIONALE.md, "A
// command's deadline").
func (l *ClusterLinks) notToSend(cmd cluster.Command) string {
	if !cmd.Deadline.IsZero() && !time.Now().Before(cmd.Deadline) {
		return fmt.Sprintf("its deadline passed %s before it reached the node holding its device's link: not sent",
			time.Since(cmd.Deadline).Round(time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(context.Background(), SendTimeout)
	defer cancel()
	rec, err := l.disp.store.Commands().Get(ctx, cmd.Message.ResponseID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "the store holds no such command: not sent"
	case err != nil:
		return fmt.Sprintf("the store could not say whether it is still pending: %v: not sent", err)
	case rec.Status != store.CommandPending:
		return fmt.Sprintf("it has ended (%s) on the node that took it: not sent", rec.Status)
	}
	return ""
}

// untilDoubt is ctx, ended as soon as this node doubts its lease.
func (l *ClusterLinks) untilDoubt(ctx context.Context) (context.Context, context.CancelFunc) {
	return l.c.UntilDoubt(ctx)
}

// stop sends CANCEL_COMMAND m to the node holding device id's link under
// lease, which sent it the command m cancels. A cancellation that does
// not arrive is logged, not retried: the command still ends as its
// session's cancellation says, and the tool at its own deadline.
func (l *ClusterLinks) stop(id string, lease int64, m *protocol.ServerMessage) {
	self, selfEpoch := l.c.Self()
	ctx, cancel := context.WithTimeout(context.Background(), SendTimeout)
	defer cancel()
	reply, err := l.c.SendCommand(ctx, cluster.Command{DeviceID: id, LeaseEpoch: lease, From: self, FromEpoch: selfEpoch, Message: m})
	if err == nil && reply.Outcome != cluster.Sent {
		err = fmt.Errorf("the node holding its link answered %s %s", reply.Outcome, reply.Error)
	}
	if err != nil {
		l.log.Warn("cancel not sent to the device on another node", "device", id, "response_id", m.ResponseID, "err", err)
	}
}

// proxiedSession is the session of command rid, if another node sent it
// here with one, and whether that node stopped it since.
func (l *ClusterLinks) proxiedSession(rid string) (*store.Session, func() bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.proxied[rid]
	if !ok {
		return nil, notStopped
	}
	return p.session, p.stopped.Load
}

// stopped notes that the node that sent command rid here stopped it.
func (l *ClusterLinks) stopped(rid string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.proxied[rid]; ok {
		p.stopped.Store(true)
	}
}

// recordedHere passes results recorded here, for a command that does not
// wait here, to the node that sent it here, or to every node if that is
// not known (the device answered here a command sent on a link it had
// elsewhere); sessionEnded if the write ended its session too.
func (l *ClusterLinks) recordedHere(rec store.Command, sessionEnded bool) {
	if rec.ResponseID == "" || rec.Status != store.CommandDone {
		return
	}
	l.mu.Lock()
	p, ok := l.proxied[rec.ResponseID]
	delete(l.proxied, rec.ResponseID)
	l.mu.Unlock()
	self, _ := l.c.Self()
	if ok && p.from == self {
		return
	}
	if !ok && rec.Late {
		return // it ended before: nobody waits for it
	}
	err := l.c.Returns().SendRecorded(p.from, cluster.Recorded{ResponseID: rec.ResponseID, DeviceID: rec.DeviceID, Results: rec.Results,
		SessionEnded: sessionEnded})
	if err != nil {
		l.log.Warn("cluster: recorded results not passed on; the node that asked reads them at its timeout", "response_id", rec.ResponseID, "err", err)
	}
}

// refusedHere passes a device's ERROR about command rid, which another
// node sent here, to that node, and reports whether it did.
func (l *ClusterLinks) refusedHere(deviceID, rid, why string) bool {
	l.mu.Lock()
	p, ok := l.proxied[rid]
	delete(l.proxied, rid)
	l.mu.Unlock()
	if !ok {
		return false
	}
	if err := l.c.Returns().SendRecorded(p.from, cluster.Recorded{ResponseID: rid, DeviceID: deviceID, Refused: why}); err != nil {
		l.log.Warn("cluster: a device's refusal not passed on; the command waits out its timeout", "response_id", rid, "err", err)
	}
	return true
}

// preparingHere passes a device's word that it prepares the tool of
// command rid, which another node sent here, to that node: its wait is
// the one that extends. The command stays proxied: its results follow.
func (l *ClusterLinks) preparingHere(deviceID, rid string, p protocol.Preparing) {
	l.mu.Lock()
	from, ok := l.proxied[rid]
	l.mu.Unlock()
	if self, _ := l.c.Self(); !ok || from.from == self || from.deviceID != deviceID {
		return
	}
	if err := l.c.Returns().SendPreparing(from.from, cluster.Preparing{ResponseID: rid, DeviceID: deviceID, Preparing: p}); err != nil {
		l.log.Warn("cluster: a device's preparation not passed on; the command's wait is not extended for it", "response_id", rid, "err", err)
	}
}

// preparingElsewhere extends the wait of a command waiting here whose
// device, linked to another node, prepares its tool.
func (l *ClusterLinks) preparingElsewhere(p cluster.Preparing) {
	l.disp.Preparing(p.DeviceID, p.ResponseID, p.Preparing)
}

// unrecordedHere tells the node that sent command rid here that its
// device answered, and this node's store could not record the results
// (why), and reports whether rid was sent from another node.
func (l *ClusterLinks) unrecordedHere(deviceID, rid, why string) bool {
	l.mu.Lock()
	p, ok := l.proxied[rid]
	l.mu.Unlock()
	self, _ := l.c.Self()
	if !ok || p.from == self {
		return false
	}
	if err := l.c.Returns().SendUnrecorded(p.from, cluster.Unrecorded{ResponseID: rid, DeviceID: deviceID, Why: why}); err != nil {
		l.log.Warn("cluster: unrecorded results not told; the command waits out its timeout", "response_id", rid, "err", err)
	}
	return true
}

// ShutDown tells the nodes that sent here commands for device id, which
// it has not answered, that its agent closed its link on purpose as it
// stopped: as on a single node, they fail unless their caller waits.
func (l *ClusterLinks) ShutDown(id string) {
	l.mu.Lock()
	var told []cluster.Recorded
	var to []string
	for rid, p := range l.proxied {
		if p.deviceID == id {
			delete(l.proxied, rid)
			told, to = append(told, cluster.Recorded{ResponseID: rid, DeviceID: id, ShutDown: true}), append(to, p.from)
		}
	}
	l.mu.Unlock()
	for i, r := range told {
		if err := l.c.Returns().SendRecorded(to[i], r); err != nil {
			l.log.Warn("cluster: a device's shutdown not passed on; its command waits out its timeout", "response_id", r.ResponseID, "err", err)
		}
	}
}

// recordedElsewhere ends a command waiting here whose results another
// node recorded: on a goroutine of its own, since NATS hands a
// subscription's messages over one at a time, and ending a command's
// session waits for a durable write, which others share only if they
// are written at once.
func (l *ClusterLinks) recordedElsewhere(r cluster.Recorded) {
	go l.disp.recordedElsewhere(r)
}
