package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/store"
)

// How sure a node is of its own lease (RATIONALE.md, "When a node is not
// sure of its lease"). The others take it as dead once its heartbeat in
// the store is DeadAfter old; it can only know when it last recorded one.
// So it doubts its lease some time before that, and takes no new work
// while it does; it takes others as dead only once it has itself
// recorded heartbeats for DeadAfter without a break, so that no node is
// declared dead for heartbeats that nobody could write; and it gives its
// lease up, closing its device links, once it has recorded none for
// DeadAfter while other nodes told it over NATS that they did.

// beatSubject is where each node says it has just recorded a heartbeat.
const beatSubject = "aip.beat"

// Beat says node From, at epoch Epoch, has just recorded a heartbeat.
type Beat struct {
	From  string `json:"from"`
	Epoch int64  `json:"epoch"`
}

func (b *Beat) check() error {
	if err := checkNodeID("from", b.From); err != nil {
		return err
	}
	return checkEpoch("epoch", b.Epoch)
}

// doubtAfter is how long after the start of its last recorded heartbeat
// a node doubts its lease: half a heartbeat before the others may take
// it as dead.
func (c *Cluster) doubtAfter() time.Duration { return c.cfg.DeadAfter - c.cfg.Heartbeat/2 }

// LeaseDoubt is why this node is not sure that it holds its lease, or ""
// if it is: it lost it (and rejoins as soon as it can), or it has
// recorded no heartbeat for long enough that the others may take it as
// dead. A node in doubt takes no new work.
func (c *Cluster) LeaseDoubt() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.doubtLocked()
}

func (c *Cluster) doubtLocked() string {
	if c.fenced != nil {
		return fmt.Sprintf("cluster: node %q lost its lease (epoch %d): %v; it rejoins the cluster at a new epoch as soon as it can",
			c.cfg.NodeID, c.epoch, c.fenced)
	}
	if silent := time.Since(c.lastBeat); silent > c.doubtAfter() {
		why := "a pause, or the store out of reach"
		if c.beatErr != nil {
			why = c.beatErr.Error()
		}
		return fmt.Sprintf("cluster: node %q has recorded no heartbeat in the store for %s (the others take a node silent for %s as dead): %s",
			c.cfg.NodeID, silent.Round(100*time.Millisecond), c.cfg.DeadAfter, why)
	}
	return ""
}

// OnFenced calls fn, in a goroutine of its own, each time this node
// loses its lease or gives it up: what it holds is others' from then on.
func (c *Cluster) OnFenced(fn func()) {
	c.mu.Lock()
	c.onFenced = append(c.onFenced, fn)
	c.mu.Unlock()
}

// fence marks the lease lost for why, and tells the OnFenced handlers,
// once per loss. It is called with c.mu held.
func (c *Cluster) fenceLocked(why error) {
	if c.fenced != nil {
		return
	}
	c.fenced = why
	c.log.Error("this node lost its lease: it no longer acts for the cluster under this epoch, and rejoins at a new one as soon as it can",
		"epoch", c.epoch, "err", why)
	for _, fn := range c.onFenced {
		go fn()
	}
}

// beatRecorded notes a heartbeat that was recorded, begun at start: the
// node's lease runs from there, and its run of heartbeats without a break
// goes on unless the heartbeat came late or took long.
func (c *Cluster) beatRecorded(start time.Time) {
	c.mu.Lock()
	unbroken := c.beatErr == nil && start.Sub(c.lastBeat) <= c.cfg.Heartbeat*3/2 && time.Since(start) <= c.cfg.Heartbeat/2
	if !unbroken || c.beatingSince.IsZero() {
		c.beatingSince = time.Now()
	}
	c.lastBeat = start
	epoch := c.epoch
	c.mu.Unlock()
	// Best effort: a node cut off from the store hears that others are not.
	_ = c.publish(beatSubject, Beat{From: c.cfg.NodeID, Epoch: epoch})
}

// steady reports whether this node has recorded heartbeats without a
// break for DeadAfter: only then may it take a silent node as dead.
func (c *Cluster) steady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.beatingSince.IsZero() && time.Since(c.beatingSince) >= c.cfg.DeadAfter
}

// peerBeat notes that another node recorded a heartbeat just now.
func (c *Cluster) peerBeat(b Beat) {
	if b.From == c.cfg.NodeID {
		return
	}
	c.mu.Lock()
	c.lastPeerBeat = time.Now()
	c.mu.Unlock()
}

// giveUpIfCutOff gives the lease up if this node has recorded no
// heartbeat for DeadAfter while another node did: the others take it as
// dead, and its devices must move to them. In an outage of the store
// itself no node records one, and none gives its lease up: they serve
// again, at the same epochs, once it is back.
func (c *Cluster) giveUpIfCutOff() {
	c.mu.Lock()
	defer c.mu.Unlock()
	silent := time.Since(c.lastBeat)
	if c.fenced != nil || silent < c.cfg.DeadAfter || time.Since(c.lastPeerBeat) > 2*c.cfg.Heartbeat {
		return
	}
	c.fenceLocked(fmt.Errorf("cut off from the store for %s while other nodes recorded heartbeats: they take it as dead", silent.Round(100*time.Millisecond)))
}

// rejoin takes the node's id again, at a new epoch, after it lost its
// lease: as a start does, announcing the death of the old epoch to this
// node's own handlers if no other node did.
func (c *Cluster) rejoin() {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.DeadAfter/2)
	defer cancel()
	start := time.Now()
	var epoch, prev int64
	err := c.cfg.Store.Write(ctx, func(tx *store.Tx) (err error) {
		epoch, prev, err = tx.Cluster().JoinNode(c.cfg.NodeID, ProtocolVersion, c.cfg.Address, c.cfg.DeadAfter)
		return err
	})
	if err != nil {
		c.log.Debug("cluster: not rejoined yet", "err", err)
		return
	}
	c.mu.Lock()
	old := c.epoch
	c.epoch, c.fenced, c.beatErr, c.lastBeat, c.beatingSince = epoch, nil, nil, start, time.Now()
	c.mu.Unlock()
	c.log.Warn("rejoined the cluster at a new epoch: what this node held under the old one is the others' now", "epoch", epoch, "old_epoch", old)
	if prev > 0 {
		c.announce([]Node{{ID: c.cfg.NodeID, Epoch: prev}})
	}
	c.readLive(ctx)
}
