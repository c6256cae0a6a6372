package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/store"
)

// handoffSubject is where a draining node says that its sessions are
// free to adopt.
const handoffSubject = "aip.tasks.handoff"

// handoffFlush bounds the wait for NATS to take a handoff.
const handoffFlush = 5 * time.Second

// Handoff says node From, at epoch FromEpoch, draining, has stopped
// running its sessions, for another node to adopt them.
type Handoff struct {
	From      string `json:"from"`
	FromEpoch int64  `json:"from_epoch"`
}

func (h *Handoff) check() error {
	if err := checkNodeID("from", h.From); err != nil {
		return err
	}
	return checkEpoch("from_epoch", h.FromEpoch)
}

// SetDraining marks this node draining in its lease from its next
// heartbeat: it takes no new links or tasks.
func (c *Cluster) SetDraining() {
	c.lease.setDraining()
}

// PublishHandoff tells every node that this one, draining, has stopped
// running its sessions, and waits for NATS to take it. It first marks the node draining in its lease
// (SetDraining must have been called): the others believe a handoff only
// from a node the store says drains (OnHandoff).
func (c *Cluster) PublishHandoff(ctx context.Context) error {
	_, epoch := c.Self()
	err := c.cfg.Store.Write(ctx, func(tx *store.Tx) error { return tx.Cluster().Heartbeat(c.cfg.NodeID, epoch, store.NodeDraining) })
	if err != nil {
		return fmt.Errorf("cluster: handoff: mark node %q draining: %w", c.cfg.NodeID, err)
	}
	if err := c.publish(handoffSubject, Handoff{From: c.cfg.NodeID, FromEpoch: epoch}); err != nil {
		return err
	}
	if err := c.nc.FlushTimeout(handoffFlush); err != nil {
		return fmt.Errorf("cluster: handoff: %w", err)
	}
	return nil
}

// OnHandoff calls fn, on a goroutine of its own, with each handoff
// another node publishes, once the store says that node is draining or
// gone at that epoch, or was since taken over: a handoff that names a
// node running its sessions is refused, logged, and its sessions left
// to it. It returns a function that stops it.
func (c *Cluster) OnHandoff(fn func(Handoff)) (stop func(), err error) {
	return subscribe[Handoff](c, handoffSubject, func(h Handoff) {
		if h.From == c.cfg.NodeID {
			return
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.DeadAfter)
			defer cancel()
			if err := c.handedOff(ctx, h); err != nil {
				c.drops.dropped("cluster: handoff refused", "from", h.From, "from_epoch", h.FromEpoch, "err", err)
				return
			}
			fn(h)
		}()
	})
}

// handedOff is nil if h's node is draining or gone at its epoch, or was
// taken over since, as the store says; else why h is not believed.
func (c *Cluster) handedOff(ctx context.Context, h Handoff) error {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		switch {
		case n.ID != h.From:
		case n.Epoch > h.FromEpoch || (n.Epoch == h.FromEpoch && n.State != store.NodeUp):
			return nil
		case n.Epoch == h.FromEpoch:
			return fmt.Errorf("node %q at epoch %d is up, not draining: its sessions stay its own", h.From, h.FromEpoch)
		default:
			return fmt.Errorf("node %q is at epoch %d, not %d", h.From, n.Epoch, h.FromEpoch)
		}
	}
	return fmt.Errorf("no node %q ever joined", h.From)
}
