package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/cluster"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/unrecorded"
)

// The dispatcher's way to devices linked to other nodes, in cluster mode
// (internal/cluster/RATIONALE.md). A command is recorded by the
// node that took it and waits there; it goes over NATS to the node
// holding its device's lease, which sends it on the link; the results
// are recorded where the device answers and come back over NATS.

// leaseIfNotHere reads device id's lease, unless the device is linked or
// between links here, or another node's lease announcement says where it
// is (where takes that): nil if no node ever held it, or on a single node.
func (l *ClusterLinks) leaseIfNotHere(id string) (*store.DeviceLease, error) {
	if at := l.reg.Reach(id); at.Link != nil || at.GraceLeft > 0 {
		return nil, nil
	}
	self, _ := l.c.Self()
	l.disp.mu.Lock()
	lc, heard := l.leases[id]
	l.disp.mu.Unlock()
	if heard && lc.NodeID != "" && lc.NodeID != self {
		return nil, nil
	}
	return l.readLease(id)
}

// readLease reads device id's lease from the store: nil if no node ever
// held it.
func (l *ClusterLinks) readLease(id string) (*store.DeviceLease, error) {
	ctx, cancel := context.WithTimeout(context.Background(), SendTimeout)
	defer cancel()
	lease, err := l.c.Lease(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("device %q: where its link is: the store could not say: %w", id, err)
	}
	return &lease, nil
}

// where is where device id is, as the dispatcher decides on it (under
// disp.mu): at, the registry's answer, unless the device is neither
// linked nor between links here; then from its lease, or from a newer
// lease change heard since it was read.
func (l *ClusterLinks) where(id string, at Whereabouts, lease *store.DeviceLease) Whereabouts {
	if at.Link != nil || at.GraceLeft > 0 {
		return at
	}
	self, selfEpoch := l.c.Self()
	if lc, ok := l.leases[id]; ok && (lease == nil || lc.Epoch > lease.Epoch) {
		switch {
		case lc.NodeID == "":
			return at // released: its grace ended wherever it was
		case lc.NodeID == self && lc.NodeEpoch == selfEpoch:
			// Registered here just now: its registration sends what waits.
			return Whereabouts{GraceLeft: l.grace}
		}
		return Whereabouts{node: lc.NodeID, leaseEpoch: lc.Epoch}
	}
	if lease == nil || !lease.Held() || (lease.NodeID == self && lease.NodeEpoch == selfEpoch) {
		return at
	}
	if !lease.HolderAlive {
		// Its node died: the device is between links until it registers
		// on another node, within its grace from that node's last word.
		return Whereabouts{GraceLeft: max(l.grace-lease.HolderSilent, 0)}
	}
	if lease.HolderVersion != cluster.ProtocolVersion {
		return Whereabouts{refused: fmt.Sprintf("device %q is linked to node %q, which speaks inter-node protocol version %d; this node speaks %d",
			id, lease.NodeID, lease.HolderVersion, cluster.ProtocolVersion)}
	}
	// Kept as if announced: the next command for the device reads no lease,
	// until a send to that node fails (retry reads it again).
	l.leases[id] = cluster.LeaseChange{DeviceID: id, NodeID: lease.NodeID, NodeEpoch: lease.NodeEpoch, Epoch: lease.Epoch}
	return Whereabouts{node: lease.NodeID, leaseEpoch: lease.Epoch}
}

// send sends cmd to node, the holder of its device's lease at epoch,
// unless it was sent there under that lease already, and acts on the
// holder's answer.
func (l *ClusterLinks) send(cmd *Command, node string, epoch int64) {
	d := l.disp
	d.mu.Lock()
	if d.pending[cmd.rec.ResponseID] != cmd || cmd.abandoned || cmd.sentOn != nil || cmd.elsewhere.lease >= epoch {
		d.mu.Unlock()
		return
	}
	wasSent := cmd.sent
	cmd.elsewhere.lease, cmd.elsewhere.node, cmd.elsewhere.delivered, cmd.sent, cmd.left = epoch, node, false, true, true
	deadline := cmd.deadline
	d.mu.Unlock()

	self, selfEpoch := l.c.Self()
	ctx, cancel := context.WithTimeout(context.Background(), SendTimeout)
	reply, err := l.c.SendCommand(ctx, cluster.Command{DeviceID: cmd.rec.DeviceID, LeaseEpoch: epoch, From: self, FromEpoch: selfEpoch,
		Timeout: cmd.timeout, Deadline: deadline, Message: cmd.msg, Session: sessionToSend(cmd.session)})
	cancel()
	l.disp.metrics.CrossNodeCommand(crossNodeOutcome(reply, err))
	if err == nil && reply.Outcome == cluster.Sent {
		d.mu.Lock()
		if cmd.elsewhere.lease == epoch {
			cmd.elsewhere.delivered, cmd.elsewhere.trouble = true, ""
		}
		d.mu.Unlock()
		cmd.log.Debug("command sent to the node holding its device's link", "node", node, "lease", epoch)
		return
	}
	d.mu.Lock()
	if cmd.elsewhere.lease == epoch {
		cmd.elsewhere.lease, cmd.sent = 0, wasSent
	}
	if err != nil {
		cmd.elsewhere.trouble = natsTrouble(node, err)
	}
	d.mu.Unlock()
	l.answered(cmd, node, reply, err)
}

// answered acts on a holder's answer, reply or err, to cmd, not sent.
func (l *ClusterLinks) answered(cmd *Command, node string, reply cluster.Reply, err error) {
	d, id := l.disp, cmd.rec.DeviceID
	switch {
	case err != nil || reply.Outcome == cluster.Stale:
		// No responders, a lease moved on, NATS away: hints to read the
		// lease again, not verdicts.
		cmd.log.Info("command not taken by the node that held its device's link; reading the lease again", "node", node, "err", err, "outcome", reply.Outcome)
		l.retry(cmd)
	case reply.Outcome == cluster.Between:
		if !cmd.waitForDevice {
			d.failUnsentAfter(cmd, reply.GraceLeft, fmt.Sprintf("device %q is offline and did not register again within its grace", id))
		}
		cmd.log.Info("device is between links on another node; the command waits for it to register again", "node", node, "within", reply.GraceLeft)
	case reply.Outcome == cluster.Down && !cmd.waitForDevice:
		d.failUnsent(cmd, shutDownFailure(id, ""))
	case reply.Outcome == cluster.Offline && !cmd.waitForDevice:
		d.failUnsent(cmd, fmt.Sprintf("device %q is offline", id))
	case reply.Outcome == cluster.Failed && reply.SenderGone:
		// This node lost its lease: the node that adopts the command's
		// session sends it again, and records how it ends.
		d.forget(cmd)
		why := "command not sent: " + reply.Error
		cmd.log.Warn("command left to the node that adopts its session: this node lost its lease", "why", why)
		d.endAs(cmd, protocol.FailAll(protocol.CallIDs(cmd.rec.Actions), why), why, false, true)
	case reply.Outcome == cluster.Failed:
		d.fail(cmd, "command not sent: "+reply.Error)
	}
}

// retry routes cmd again after a pause that grows with its retries:
// from the lease as the store has it now.
func (l *ClusterLinks) retry(cmd *Command) {
	d := l.disp
	d.mu.Lock()
	cmd.elsewhere.retries++
	n := cmd.elsewhere.retries
	d.mu.Unlock()
	if n > noHolderRetries {
		cmd.log.Warn("no node takes the command for its device; it waits for the device's next lease", "retries", n-1)
		return
	}
	pause := min(50*time.Millisecond<<n, time.Second)
	select {
	case <-cmd.done:
		return
	case <-time.After(pause):
	}
	lease, err := l.readLease(cmd.rec.DeviceID)
	if err != nil {
		d.mu.Lock()
		cmd.elsewhere.trouble = err.Error()
		d.mu.Unlock()
		cmd.log.Warn("command waits: its device's lease could not be read", "err", err)
		return
	}
	d.mu.Lock()
	if d.pending[cmd.rec.ResponseID] != cmd {
		d.mu.Unlock()
		return
	}
	if lease != nil {
		// What the store says now wins over what was heard before it.
		delete(l.leases, cmd.rec.DeviceID)
	}
	at := l.where(cmd.rec.DeviceID, d.reg.Reach(cmd.rec.DeviceID), lease)
	d.mu.Unlock()
	switch {
	case at.Link != nil:
		d.send(cmd, at.Link, true)
	case at.node != "":
		l.send(cmd, at.node, at.leaseEpoch)
	case at.refused != "":
		d.failUnsent(cmd, at.refused)
	case at.GraceLeft == 0 && !cmd.waitForDevice:
		d.failUnsent(cmd, fmt.Sprintf("device %q is offline", cmd.rec.DeviceID))
	}
}

// natsTrouble names NATS as what kept a command from node, which holds
// its device's link, by err.
func natsTrouble(node string, err error) string {
	switch {
	case errors.Is(err, cluster.ErrNATS):
		return fmt.Sprintf("NATS: not connected, so it could not go to node %q, which holds the device's link", node)
	case errors.Is(err, cluster.ErrNoHolder):
		return fmt.Sprintf("NATS: node %q holds the device's link, but nothing listens for the device there", node)
	}
	return fmt.Sprintf("NATS: node %q, which holds the device's link, did not answer over NATS (%v); it may have it", node, err)
}

// natsChanged acts on NATS lost (lost, why) or back (nil). Lost: a
// command out on another node may not get its results back, which its
// failure will say. Back: the commands NATS or the store kept from other
// nodes are routed again at once, and those out on another node end if
// their results were recorded meanwhile, whose word was lost with NATS.
func (l *ClusterLinks) natsChanged(lost error) {
	d := l.disp
	var again, recheck []*Command
	d.mu.Lock()
	for _, cmd := range d.pending {
		out := &cmd.elsewhere
		switch {
		case cmd.sentOn != nil:
		case lost != nil && out.lease != 0:
			out.trouble = fmt.Sprintf("NATS: the connection was lost (%v) while the command was out on node %q; its results may not have come back", lost, out.node)
		case lost == nil && out.lease != 0:
			recheck = append(recheck, cmd)
		case lost == nil && out.trouble != "":
			out.retries = 0
			again = append(again, cmd)
		}
	}
	d.mu.Unlock()
	for _, cmd := range again {
		go l.retry(cmd)
	}
	for _, cmd := range recheck {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), SendTimeout)
			defer cancel()
			d.settleIfRecorded(ctx, cmd)
		}()
	}
}

// failUnsentAfter fails cmd after wait if it is still unsent then,
// unless it already has such a deadline.
func (d *Dispatcher) failUnsentAfter(cmd *Command, wait time.Duration, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cmd.unsentTimer != nil || d.pending[cmd.rec.ResponseID] != cmd {
		return
	}
	cmd.unsentTimer = time.AfterFunc(wait, func() { d.failUnsent(cmd, reason) })
}

// sendOnLeaseChange sends the commands waiting here for the device of lc to
// its new holder, unless that is this node (mine), whose registration
// sends them; a released lease (its grace ended) fails those never sent
// and keeps those sent from being sent again, as a grace that ends here.
func (l *ClusterLinks) sendOnLeaseChange(lc cluster.LeaseChange, mine bool) {
	d := l.disp
	d.mu.Lock()
	if old, ok := l.leases[lc.DeviceID]; ok && old.Epoch >= lc.Epoch && !(lc.NodeID == "" && old.Epoch == lc.Epoch) {
		d.mu.Unlock()
		return
	}
	l.leases[lc.DeviceID] = lc
	var todo []*Command
	for _, cmd := range d.pending {
		if cmd.rec.DeviceID == lc.DeviceID && cmd.sentOn == nil && cmd.elsewhere.lease < lc.Epoch {
			todo = append(todo, cmd)
		}
	}
	d.mu.Unlock()
	switch {
	case mine:
	case lc.NodeID == "":
		for _, cmd := range todo {
			if !cmd.waitForDevice && !d.failUnsent(cmd, fmt.Sprintf("device %q is offline and did not register again within its grace", lc.DeviceID)) {
				d.abandonCommand(cmd)
			}
		}
	default:
		for _, cmd := range todo {
			d.mu.Lock()
			cmd.elsewhere.retries = 0
			d.mu.Unlock()
			go l.send(cmd, lc.NodeID, lc.Epoch)
		}
	}
}

// abandonCommand keeps cmd from being sent again; see abandon.
func (d *Dispatcher) abandonCommand(cmd *Command) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cmd.abandoned = true
}

// recordedElsewhere ends the command r is the results of, if it waits
// here, with the session it alone makes up; or fails it, if its device
// refused it.
func (d *Dispatcher) recordedElsewhere(r cluster.Recorded) {
	cmd := d.waiting(r.ResponseID)
	if cmd == nil || cmd.rec.DeviceID != r.DeviceID {
		return
	}
	switch {
	case r.Refused != "":
		cmd.log.Warn("device refused the command", "error", r.Refused)
		d.fail(cmd, fmt.Sprintf("device %q refused the command: %s", r.DeviceID, r.Refused))
		return
	case r.ShutDown && cmd.waitForDevice:
		d.mu.Lock()
		cmd.elsewhere.lease = 0 // sent again wherever the device registers next
		d.mu.Unlock()
		return
	case r.ShutDown:
		d.fail(cmd, shutDownFailure(r.DeviceID, " before it answered"))
		return
	}
	rec := cmd.rec
	rec.Results, rec.Status = r.Results, store.CommandDone
	if cmd.session != nil && !r.SessionEnded {
		err := d.unrecorded.Record(context.Background(), unrecorded.Write{What: "end of the session of command " + rec.ResponseID, Size: unrecorded.FailureBytes,
			Fn: func(tx *store.Tx) error { return d.endSession(tx, cmd.session, rec, cmd.stopped.Load()) }})
		if err != nil {
			cmd.log.Error("session end not recorded", "err", err)
		}
	}
	d.forget(cmd)
	d.end(cmd, r.Results, "", true)
	cmd.log.Debug("results recorded by another node", "status", Result{Results: r.Results}.Status())
}

// unrecordedElsewhere fails a command waiting here that its device
// answered on another node, whose store could not record the results: the
// store failed, not the device, and the results come late.
func (d *Dispatcher) unrecordedElsewhere(u cluster.Unrecorded) {
	cmd := d.waiting(u.ResponseID)
	if cmd == nil || cmd.rec.DeviceID != u.DeviceID {
		return
	}
	d.fail(cmd, fmt.Sprintf("device %q answered on node %q, but that node could not record its results: %s", u.DeviceID, u.From, u.Why))
}

// crossNodeOutcome is the metric label of a send to another node that
// ended with reply and err.
func crossNodeOutcome(reply cluster.Reply, err error) string {
	switch {
	case errors.Is(err, cluster.ErrNoHolder):
		return "no_holder"
	case err != nil:
		return "error"
	}
	return reply.Outcome
}

// sessionToSend is session as another node gets it, to end it with the
// command's results: without its idempotency key, recorded here already.
func sessionToSend(session *store.Session) *store.Session {
	if session == nil {
		return nil
	}
	out := *session
	out.Key = nil
	return &out
}
