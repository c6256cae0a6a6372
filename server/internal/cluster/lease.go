package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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

// ownLease is this node's lease on its id, as far as it can know it.
type ownLease struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	epoch    int64 // this process's, on its id: a new one each time it rejoins
	fenced   error // the lease under epoch was lost: until the node rejoins
	beatErr  error // the last heartbeat's error; nil once one succeeds
	draining bool
	writing  bool // a heartbeat's write has not returned yet
	onFenced []func()
	// lastBeat and lastBeatEnd are when the last heartbeat recorded began
	// and was recorded; beatingSince, when the run of heartbeats recorded
	// without a break that goes on now began (zero: none goes on);
	// lastPeerBeat, when another node last said it recorded one.
	lastBeat, lastBeatEnd, beatingSince, lastPeerBeat time.Time
	// doubted ends, its cause the doubt, as soon as this node doubts its
	// lease: when its silence reaches the bound, timed by doubtTimer from
	// the last heartbeat recorded, or when it loses the lease. A
	// heartbeat recorded after it ended starts a new one.
	doubted    context.Context
	endDoubted context.CancelCauseFunc
	doubtTimer *time.Timer
}

// join takes the node's id, at the next epoch if a process of it held
// it before, and returns the epoch taken over from a process that was
// not marked gone (its death was never announced), else 0.
func (l *ownLease) join(ctx context.Context) (prev int64, err error) {
	start := time.Now() // joining records a heartbeat
	var epoch int64
	err = l.cfg.Store.Write(ctx, func(tx *store.Tx) (err error) {
		epoch, prev, err = tx.Cluster().JoinNode(l.cfg.NodeID, ProtocolVersion, l.cfg.Address, l.cfg.DeadAfter)
		return err
	})
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	now := time.Now()
	l.epoch, l.fenced, l.beatErr, l.lastBeat, l.lastBeatEnd, l.beatingSince = epoch, nil, nil, start, now, now
	l.armDoubt()
	l.mu.Unlock()
	return prev, nil
}

func (l *ownLease) current() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// doubt is why this node is not sure that it holds its lease, or "".
func (l *ownLease) doubt() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.doubtLocked()
}

// doubtLocked is doubt, with l.mu held.
func (l *ownLease) doubtLocked() string {
	if l.fenced != nil {
		return fmt.Sprintf("cluster: node %q lost its lease (epoch %d): %v; it rejoins the cluster at a new epoch as soon as it can",
			l.cfg.NodeID, l.epoch, l.fenced)
	}
	if silent := time.Since(l.lastBeat); silent > l.silenceBound() {
		why := "a pause, or the store out of reach"
		if l.beatErr != nil {
			why = l.beatErr.Error()
		}
		return fmt.Sprintf("cluster: node %q has recorded no heartbeat in the store for %s (the others take a node silent for %s as dead): %s",
			l.cfg.NodeID, silent.Round(100*time.Millisecond), l.cfg.DeadAfter, why)
	}
	return ""
}

// silenceBound is how long after the start of its last heartbeat
// recorded a node doubts its lease: half a heartbeat before the others
// may take it as dead.
func (l *ownLease) silenceBound() time.Duration { return l.cfg.DeadAfter - l.cfg.Heartbeat/2 }

// armDoubt times the doubt from the last heartbeat recorded, with l.mu
// held: doubted ends at the silence's bound, unless another is recorded
// first.
func (l *ownLease) armDoubt() {
	if l.doubted == nil || l.doubted.Err() != nil {
		l.doubted, l.endDoubted = context.WithCancelCause(context.Background())
	}
	in := time.Until(l.lastBeat.Add(l.silenceBound()))
	if l.doubtTimer == nil {
		l.doubtTimer = time.AfterFunc(in, l.doubtBegins)
		return
	}
	l.doubtTimer.Reset(in)
}

// doubtBegins ends doubted, its cause the doubt, if the node doubts its
// lease now; else (a timer that fired on the bound's very edge) it times
// it again.
func (l *ownLease) doubtBegins() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if why := l.doubtLocked(); why != "" {
		l.endDoubted(errors.New(why))
		return
	}
	l.doubtTimer.Reset(max(time.Until(l.lastBeat.Add(l.silenceBound())), time.Millisecond))
}

// doubtedContext is doubted: see UntilDoubt.
func (l *ownLease) doubtedContext() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.doubted
}

// lastErr is the last heartbeat's error, or nil.
func (l *ownLease) lastErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.beatErr
}

// state says whether the lease is lost, and whether the node drains.
func (l *ownLease) state() (fenced, draining bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fenced != nil, l.draining
}

func (l *ownLease) setDraining() {
	l.mu.Lock()
	l.draining = true
	l.mu.Unlock()
}

func (l *ownLease) addOnFenced(fn func()) {
	l.mu.Lock()
	l.onFenced = append(l.onFenced, fn)
	l.mu.Unlock()
}

// fence marks the lease lost for why, and tells the OnFenced handlers,
// once per loss. It is called with l.mu held.
func (l *ownLease) fence(why error) {
	if l.fenced != nil {
		return
	}
	l.fenced = why
	if l.endDoubted != nil {
		l.endDoubted(errors.New(l.doubtLocked()))
	}
	l.log.Error("this node lost its lease: it no longer acts for the cluster under this epoch, and rejoins at a new one as soon as it can",
		"epoch", l.epoch, "err", why)
	for _, fn := range l.onFenced {
		go fn()
	}
}

// beat renews the lease, and reports whether it still holds it, at which
// epoch. A heartbeat recorded within DeadAfter/2 of the one before
// continues the run of heartbeats without a break; any other ends it.
func (l *ownLease) beat() (epoch int64, ok bool) {
	l.mu.Lock()
	epoch, state := l.epoch, store.NodeUp
	if l.draining {
		state = store.NodeDraining
	}
	l.mu.Unlock()
	start := time.Now()
	err := l.write(epoch, state)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case errors.Is(err, store.ErrFenced):
		l.fence(fmt.Errorf("the cluster took it as dead, or another process took its id: %w", err))
		return epoch, false
	case err != nil && l.beatErr == nil:
		l.log.Error("heartbeat failed", "err", err)
	case err == nil && l.beatErr != nil:
		l.log.Info("heartbeat recorded again")
	}
	if err != nil {
		l.beatErr, l.beatingSince = err, time.Time{}
		return epoch, false
	}
	// The store was in reach at least every DeadAfter/2 (a beat takes at
	// most that, or fails): then no node's heartbeat could have been kept
	// out of it for DeadAfter without its own fault.
	now := time.Now()
	unbroken := l.beatErr == nil && now.Sub(l.lastBeatEnd) <= l.cfg.DeadAfter/2
	if !unbroken || l.beatingSince.IsZero() {
		l.beatingSince = now
	}
	l.beatErr, l.lastBeat, l.lastBeatEnd = nil, start, now
	l.armDoubt()
	return epoch, true
}

// write records a heartbeat, waiting at most DeadAfter/2: a store that
// drops packets holds a write far longer, and the node must go on
// ticking (to give its lease up) meanwhile. A write still waiting from
// an earlier tick makes this one fail at once, rather than queue another.
func (l *ownLease) write(epoch int64, state string) error {
	l.mu.Lock()
	if l.writing {
		l.mu.Unlock()
		return errors.New("the heartbeat of an earlier tick is not recorded yet: the store does not answer")
	}
	l.writing = true
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.DeadAfter/2)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		// Not given up at the bound, only no longer waited for: recorded
		// late, it still tells the others, truly, that this node lives.
		err := l.cfg.Store.Write(context.WithoutCancel(ctx), func(tx *store.Tx) error {
			return tx.Cluster().Heartbeat(l.cfg.NodeID, epoch, state)
		})
		l.mu.Lock()
		l.writing = false
		l.mu.Unlock()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("not recorded within %s: the store does not answer", l.cfg.DeadAfter/2)
	}
}

// steady reports whether this node has recorded heartbeats without a
// break for DeadAfter: only then may it take a silent node as dead.
func (l *ownLease) steady() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.beatingSince.IsZero() && time.Since(l.beatingSince) >= l.cfg.DeadAfter
}

// peerBeat notes that another node said it recorded a heartbeat.
func (l *ownLease) peerBeat(b Beat) {
	if b.From == l.cfg.NodeID {
		return
	}
	l.mu.Lock()
	l.lastPeerBeat = time.Now()
	l.mu.Unlock()
}

// giveUpIfCutOff gives the lease up if this node has recorded no
// heartbeat for DeadAfter while another node said, just now, that it
// did: the others take it as dead, and its devices must move to them. In
// an outage of the store itself no node records one, and none gives its
// lease up: they serve again, at the same epochs, once it is back.
func (l *ownLease) giveUpIfCutOff() {
	l.mu.Lock()
	defer l.mu.Unlock()
	silent := time.Since(l.lastBeat)
	if l.fenced != nil || silent < l.cfg.DeadAfter || time.Since(l.lastPeerBeat) > 2*l.cfg.Heartbeat {
		return
	}
	l.fence(fmt.Errorf("cut off from the store for %s while other nodes recorded heartbeats: they take it as dead", silent.Round(100*time.Millisecond)))
}

// LeaseDoubt is why this node is not sure that it holds its lease, or ""
// if it is: it lost it (and rejoins as soon as it can), or it has
// recorded no heartbeat for long enough that the others may take it as
// dead. A node in doubt takes no new work.
func (c *Cluster) LeaseDoubt() string { return c.lease.doubt() }

// UntilDoubt is parent, ended as soon as this node doubts its lease,
// with the doubt (LeaseDoubt's words) as its cause; stop releases it. It
// is for work that waits, and must stop waiting once new work is refused.
func (c *Cluster) UntilDoubt(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	doubted := c.lease.doubtedContext()
	ctx, cancel := context.WithCancelCause(parent)
	unhook := context.AfterFunc(doubted, func() { cancel(context.Cause(doubted)) })
	return ctx, func() { unhook(); cancel(context.Canceled) }
}

// OnFenced calls fn, in a goroutine of its own, each time this node
// loses its lease or gives it up: what it holds is others' from then on.
func (c *Cluster) OnFenced(fn func()) { c.lease.addOnFenced(fn) }

// tick is one heartbeat: a node that lost its lease rejoins instead, as
// a start does; one that cannot record it gives its lease up if it is
// cut off from the store alone; one that has recorded heartbeats without
// a break for DeadAfter sweeps for dead nodes.
func (c *Cluster) tick() {
	fenced, draining := c.lease.state()
	switch {
	case fenced && draining:
		return
	case fenced:
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.DeadAfter/2)
		defer cancel()
		old := c.lease.current()
		prev, err := c.lease.join(ctx)
		if err != nil {
			c.log.Debug("cluster: not rejoined yet", "err", err)
			return
		}
		c.log.Warn("rejoined the cluster at a new epoch: what this node held under the old one is the others' now",
			"epoch", c.lease.current(), "old_epoch", old)
		if prev > 0 {
			c.announce([]Node{{ID: c.cfg.NodeID, Epoch: prev}})
		}
		c.readLive(ctx)
		return
	}
	epoch, ok := c.lease.beat()
	if !ok {
		c.lease.giveUpIfCutOff()
		return
	}
	// Best effort: a node cut off from the store hears that others are not.
	_ = c.publish(beatSubject, Beat{From: c.cfg.NodeID, Epoch: epoch})
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.DeadAfter/2)
	defer cancel()
	if c.lease.steady() {
		c.sweep(ctx)
	} else {
		c.readLive(ctx)
	}
}
