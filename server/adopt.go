package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/cluster"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/unrecorded"
	"github.com/edgeaip/edgeaip/server/plan"
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
		ids, err = tx.AdoptSessions(from, s.owner())
		return err
	})
	if err != nil {
		return 0, err
	}
	if len(ids) > 0 {
		s.log.Warn("adopted the sessions of a node that died or handed them off", "from", from.Node, "from_epoch", from.Epoch, "sessions", len(ids))
	}
	s.sessions.resumeAll(ctx, ids)
	return len(ids), nil
}

// adoptOrphans adopts the unfinished sessions of every node that no
// longer runs them: gone (dead, or stopped), or started again since at
// another epoch. Each is adopted once, by whichever node gets to it
// first. A node that is only late with its heartbeats is left alone
// until the cluster marks it gone.
func (s *Server) adoptOrphans(ctx context.Context) error {
	owners, err := s.store.UnfinishedOwners(ctx)
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
// cluster announces each death on one node), of nodes that hand theirs
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
	s.cluster.OnDead(func(string, int64) { poke() })
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

// resumeAll runs on the adopted sessions ids: fleets last, so that each
// finds its devices' tasks, adopted with it, running. One that cannot be
// run on is ended, failed, saying why: adopted, it is no other node's to
// end. ctx's values serve, not its end: the adoption is committed, so a
// deadline meant for it (a handoff's, a sweep's) that passed meanwhile,
// under a slow store, must not leave them adopted and neither run nor
// failed, which no other node would ever take up while this one lives.
func (m *sessionManager) resumeAll(ctx context.Context, ids []string) {
	ctx = context.WithoutCancel(ctx)
	var fleets []store.Session
	for _, id := range ids {
		row, err := m.store.Session(ctx, id)
		switch {
		case err != nil:
			m.resumed(ctx, id, err)
		case row.Kind == api.KindFleet:
			fleets = append(fleets, row)
		default:
			m.resumed(ctx, id, m.resume(ctx, row))
		}
	}
	for _, row := range fleets {
		m.resumed(ctx, row.ID, m.resume(ctx, row))
	}
}

// resumed deals with err, how running the adopted session id on began.
func (m *sessionManager) resumed(ctx context.Context, id string, err error) {
	switch {
	case err == nil:
	case errors.Is(err, errShuttingDown):
		// This node stops too: once it has left, another adopts it.
		m.log.Warn("adopted session not run on: this node is stopping", "session_id", id)
	default:
		m.log.Error("adopted session not run on; failing it", "session_id", id, "err", err)
		m.failAdopted(ctx, id, err)
	}
}

// resume runs on the adopted session row from its last recorded step.
func (m *sessionManager) resume(ctx context.Context, row store.Session) error {
	cmds, err := m.store.CommandsOfSession(ctx, row.ID)
	if err != nil {
		return err
	}
	spec, err := m.resumedSpec(ctx, row)
	if err != nil {
		return err
	}
	if row.Kind == api.KindCommand {
		return m.resumeCommand(spec, row, cmds)
	}
	if spec.Plan, err = plan.Parse(row.Plan); err != nil {
		return fmt.Errorf("session %q: its plan: %w", row.ID, err)
	}
	switch row.Kind {
	case api.KindPlan:
		s, err := m.adopted(spec, row, cmds)
		if err != nil {
			return err
		}
		go m.runPlan(s, nil)
	case api.KindFleet:
		return m.resumeFleet(ctx, spec, row)
	default:
		return fmt.Errorf("session %q: kind %q", row.ID, row.Kind)
	}
	return nil
}

// resumeCommand runs on the adopted single command of session row, its
// command cmds[0].
func (m *sessionManager) resumeCommand(spec sessionSpec, row store.Session, cmds []store.Command) error {
	if len(cmds) != 1 {
		return fmt.Errorf("session %q: a single command's task has %d commands recorded", row.ID, len(cmds))
	}
	c := cmds[0]
	spec.WaitForDevice = c.WaitForDevice
	s, err := m.adopted(spec, row, cmds)
	if err != nil {
		return err
	}
	go execute(m, s, commandRunner{sessionID: s.ID, deviceID: s.DeviceID, actions: c.Actions, timeout: c.Timeout,
		waitForDevice: c.WaitForDevice}, nil)
	return nil
}

// resumeFleet runs on the adopted fleet of row, whose spec has its plan:
// the devices' tasks it started are waited for (those not ended were
// adopted with it), the others started.
func (m *sessionManager) resumeFleet(ctx context.Context, spec sessionSpec, row store.Session) error {
	fleet, err := recordedFleet(row)
	if err != nil {
		return err
	}
	children, err := m.store.ChildSessions(ctx, row.ID)
	if err != nil {
		return err
	}
	spec.Fleet = &fleet
	s, err := m.adopted(spec, row, nil)
	if err != nil {
		return err
	}
	s.fleet.prior = make(map[string]store.Session, len(children))
	for _, c := range children {
		s.fleet.prior[c.DeviceID] = c
	}
	go execute(m, s, s.fleet, nil)
	return nil
}

// resumedSpec is the spec of the recorded session row, held to its
// requester's scope as it is now.
func (m *sessionManager) resumedSpec(ctx context.Context, row store.Session) (sessionSpec, error) {
	spec := sessionSpec{ID: row.ID, TaskName: row.TaskName, DeviceID: row.DeviceID, ParentID: row.ParentID,
		Requester:        api.Requester{Kind: row.RequesterKind, ID: row.RequesterID, Identity: row.Identity, TokenID: row.TokenID},
		OriginalTaskName: row.OriginalTaskName}
	if row.Identity == "" {
		return spec, nil // recorded before identities: the operator's
	}
	id, err := m.store.Identity(ctx, row.Identity)
	if err != nil {
		return spec, fmt.Errorf("session %q: its requester's identity: %w", row.ID, err)
	}
	if id.Devices != "" || len(id.Tools) > 0 {
		if spec.Scope, err = access.ParseScope(id.Devices, id.Tools); err != nil {
			return spec, fmt.Errorf("session %q: identity %q: scope: %w", row.ID, id.Name, err)
		}
	}
	return spec, nil
}

// adopted makes the live session of spec, recorded as row with the
// commands cmds, which it does not make again. It is not refused for
// the session limit: it was accepted once already.
func (m *sessionManager) adopted(spec sessionSpec, row store.Session, cmds []store.Command) (*session, error) {
	s := m.newSession(spec)
	s.createdAt, s.persisted = row.CreatedAt, row.Kind != api.KindCommand
	s.history = make(map[stepAttempt]store.Command, len(cmds))
	for _, c := range cmds {
		s.history[stepAttempt{c.Step, c.Attempt}] = c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errShuttingDown
	}
	m.live[s.ID] = s
	m.wg.Add(1)
	return s, nil
}

// failAdopted ends the adopted session id, which could not be run on,
// failed with why.
func (m *sessionManager) failAdopted(ctx context.Context, id string, why error) {
	row, err := m.store.Session(ctx, id)
	if err != nil {
		m.log.Error("adopted session not failed", "session_id", id, "err", err)
		return
	}
	row.Owner = m.owner
	row.State, row.Error = string(api.StateFailed), fmt.Sprintf("adopted by %s, which could not run it on: %v", m.owner, why)
	err = m.unrecorded.Record(ctx, unrecorded.Write{What: "end of session " + id, Size: unrecorded.FailureBytes,
		Fn: func(tx *store.Tx) error { return tx.EndSession(row) }})
	if err != nil {
		m.log.Error("adopted session not failed", "session_id", id, "err", err)
	}
}
