package rollouts

import (
	"context"
	"errors"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/store"
)

// Node is a cluster node as the engine leads rollouts on it: one node
// leads each rollout, under its lease (server/internal/cluster
// RATIONALE.md, "Rollouts in a cluster").
type Node interface {
	// Self is this node's id and the epoch of its lease.
	Self() (id string, epoch int64)
	// Doubt is why this node may lead nothing now, or "": it is not sure
	// that it holds its lease, or it drains.
	Doubt() string
	// Announce tells the other nodes that rollout name changed here (an
	// apply, a pause, a resume, a rollback, a lead given up), so that
	// its leader, or a node that takes the lead, reconciles it now.
	Announce(name string)
}

// errLeadLost ends the changes a worker started while it led its
// rollout: another node leads it now, and starts its own.
var errLeadLost = errors.New("this node no longer leads the rollout")

// lead is a worker's lead of its rollout: the epoch of this node's
// lease it was taken under (0: none), and the context of the changes
// started under it. Only the worker's goroutine touches it.
type lead struct {
	epoch  int64
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// leads reports whether this node leads w's rollout now: always on a
// single node; in a cluster, while it is sure of its lease and the
// rollout's row names it at its lease's epoch, taking the lead in one
// fenced write if no node that holds its lease leads it. A lead is
// remembered for the epoch it was taken under: no store write while it
// lasts, and a read only while another node leads.
func (e *Engine) leads(ctx context.Context, w *worker) bool {
	node := e.cfg.Node
	if node == nil {
		return true
	}
	if doubt := node.Doubt(); doubt != "" {
		e.drop(w, doubt, true)
		return false
	}
	id, epoch := node.Self()
	if w.lead.epoch == epoch {
		return true
	}
	e.drop(w, "this node rejoined the cluster at a new epoch", false)
	l, err := e.cfg.Store.Rollouts().Leader(ctx, w.name)
	if err != nil || (l.Held && (l.Node != id || l.Epoch != epoch)) {
		return false
	}
	if l.Node != id || l.Epoch != epoch {
		var took bool
		err = e.cfg.Store.Write(ctx, func(tx *store.Tx) (err error) {
			took, err = tx.Rollouts().TakeLead(w.name, id, epoch)
			return err
		})
		if err != nil || !took {
			return false
		}
		e.log.Info("took the lead of the rollout", "rollout", w.name, "epoch", epoch, "from", l.Node, "from_epoch", l.Epoch)
	}
	lctx, cancel := context.WithCancelCause(e.ctx)
	w.lead = lead{epoch: epoch, ctx: lctx, cancel: cancel}
	return true
}

// stillLeads reports whether the rollout's row, as just read, names
// this node as its leader under the lead w holds; if not (another node
// took it over), w's lead ends.
func (e *Engine) stillLeads(w *worker, leaderNode string, leaderEpoch int64) bool {
	if e.cfg.Node == nil {
		return true
	}
	id, _ := e.cfg.Node.Self()
	if leaderNode == id && leaderEpoch == w.lead.epoch {
		return true
	}
	e.drop(w, "another node leads it now", false)
	return false
}

// drop ends w's lead, for why, if it has one: the changes it started
// stop; with release, the lead is given up in the store, so that
// another node takes it at once.
func (e *Engine) drop(w *worker, why string, release bool) {
	if w.lead.epoch == 0 {
		return
	}
	was := w.lead
	w.lead = lead{}
	was.cancel(errLeadLost)
	e.log.Warn("no longer leads the rollout", "rollout", w.name, "epoch", was.epoch, "why", why)
	if release {
		e.wg.Go(func() { e.release(w.name, was.epoch) })
	}
}

// leadLost reports whether ctx, a change's, ended because the server
// stops or this node no longer leads the change's rollout: the change
// is taken on after the restart, or by the new leader.
func (e *Engine) leadLost(ctx context.Context) bool {
	return e.ctx.Err() != nil || errors.Is(context.Cause(ctx), errLeadLost)
}

// release gives up this node's lead of rollout name at epoch, and tells
// the other nodes.
func (e *Engine) release(name string, epoch int64) {
	id, _ := e.cfg.Node.Self()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), releaseWithin)
	defer cancel()
	err := e.cfg.Store.Write(ctx, func(tx *store.Tx) error { return tx.Rollouts().ReleaseLead(name, id, epoch) })
	if err != nil {
		e.log.Warn("rollout's lead not given up; another node takes it once this node's lease is gone", "rollout", name, "err", err)
		return
	}
	e.cfg.Node.Announce(name)
}

// releaseWithin bounds the write that gives a lead up.
const releaseWithin = 5 * time.Second

// changesCtx is the context of the changes w starts: its lead's, which
// ends with the lead; the engine's on a single node.
func (e *Engine) changesCtx(w *worker) context.Context {
	if e.cfg.Node == nil || w.lead.ctx == nil {
		return e.ctx
	}
	return w.lead.ctx
}
