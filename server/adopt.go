package server

import (
	"context"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/cluster"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// Tasks that outlive their node: in a cluster each session belongs to the
// node that accepted it, at that node's fencing epoch. When a node dies,
// another adopts its unfinished sessions in one fenced write and runs each
// on from its last recorded step; see internal/cluster/RATIONALE.md,
// "Tasks that outlive their node".

// owner is this node at this start: the owner of the sessions it runs;
// the zero Owner on a single node.
func (s *Server) owner() store.Owner {
	if s.cluster == nil {
		return store.Owner{}
	}
	id, epoch := s.cluster.Self()
	return store.Owner{Node: id, Epoch: epoch}
}

// adoptFrom adopts the unfinished sessions of from, a node found dead or
// one that handed its sessions off, and runs each on here from its last
// recorded step. It returns how many it adopted: none if another node
// adopted them first, or if this node drains (it would only hand them
// off again).
func (s *Server) adoptFrom(ctx context.Context, from store.Owner) (int, error) {
	if from == s.owner() {
		return 0, fmt.Errorf("adopt the sessions of %s: that is this node", from)
	}
	if s.draining.Load() {
		return 0, nil
	}
	var ids []string
	err := s.store.Write(ctx, func(tx *store.Tx) (err error) {
		ids, err = tx.Sessions().Adopt(from, s.owner())
		return err
	})
	if err != nil {
		return 0, err
	}
	if len(ids) > 0 {
		s.log.Warn("adopted the sessions of a node that died or handed them off", "from", from.Node, "from_epoch", from.Epoch, "sessions", len(ids))
	}
	s.sessions.ResumeAll(ctx, ids)
	return len(ids), nil
}

// adoptOrphans adopts the unfinished sessions of every node that no
// longer runs them: gone (dead, or stopped), or started again since at
// another epoch. Each is adopted once, by whichever node gets to it
// first. A node that is only late with its heartbeats is left alone
// until the cluster marks it gone.
func (s *Server) adoptOrphans(ctx context.Context) error {
	owners, err := s.store.Sessions().UnfinishedOwners(ctx)
	if err != nil || len(owners) == 0 {
		return err
	}
	nodes, err := s.cluster.Nodes(ctx)
	if err != nil {
		return err
	}
	current := make(map[string]cluster.Node, len(nodes))
	for _, n := range nodes {
		current[n.ID] = n
	}
	for _, o := range owners {
		n, known := current[o.Node]
		if o.Node == "" || o == s.owner() || (known && n.Epoch == o.Epoch && n.State != store.NodeGone) {
			continue
		}
		if _, err := s.adoptFrom(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// watchOrphans adopts, until stop, the sessions of nodes that die (the
// cluster announces each death on one node, which also finds the
// rollouts they led a leader), of nodes that hand theirs
// off as they drain, and every orphanSweep those of any other node that
// no longer runs its own: one whose death was announced on a node that
// died before it adopted them, say. Run in a goroutine of its own.
func (s *Server) watchOrphans(stop <-chan struct{}, every time.Duration) {
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	s.cluster.OnDead(func(string, int64) {
		poke()
		s.kickStoredRollouts()
	})
	unsub, err := s.cluster.OnHandoff(func(h cluster.Handoff) { s.handedOff(store.Owner{Node: h.From, Epoch: h.FromEpoch}, every) })
	if err != nil {
		s.log.Error("cluster: handoffs of draining nodes not heard; their sessions are adopted by the sweep", "err", err)
	} else {
		defer unsub()
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), every)
		if err := s.adoptOrphans(ctx); err != nil {
			s.log.Error("cluster: sessions of dead nodes not adopted; trying again", "err", err, "in", every)
		}
		cancel()
		select {
		case <-stop:
			return
		case <-wake:
		case <-t.C:
		}
	}
}

// handedOff adopts the sessions of from, which handed them off (it has
// stopped running them), within timeout.
func (s *Server) handedOff(from store.Owner, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := s.adoptFrom(ctx, from); err != nil {
		s.log.Error("cluster: sessions handed off not adopted; the sweep tries again once the node is gone", "from", from.Node, "err", err)
	}
}
