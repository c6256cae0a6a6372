package server

import (
	"context"
	"fmt"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/plan"
)

// Tasks that outlive their node: in a cluster each session belongs to the
// node that accepted it, at that node's fencing epoch. When a node dies,
// another adopts its unfinished sessions in one fenced write and runs each
// on from its last recorded step; see RATIONALE.md, "Tasks that outlive
// their node".

// owner is this node at this start: the owner of the sessions it runs.
func (s *Server) owner() store.Owner {
	if s.cfg.NodeID == "" {
		return store.Owner{}
	}
	return store.Owner{Node: s.cfg.NodeID, Epoch: s.cfg.NodeEpoch}
}

// AdoptFrom adopts the unfinished sessions of node at epoch, a node found
// dead, and runs each on here from its last recorded step. It returns how
// many it adopted: none if another node adopted them first. Call it when
// cluster membership finds a node dead, for each epoch of it that left
// sessions unfinished.
func (s *Server) AdoptFrom(ctx context.Context, node string, epoch int64) (int, error) {
	if s.cfg.NodeID == "" {
		return 0, fmt.Errorf("adopt the sessions of node %q: this server is a single node, not a node of a cluster", node)
	}
	from := store.Owner{Node: node, Epoch: epoch}
	if from == s.owner() {
		return 0, fmt.Errorf("adopt the sessions of %s: that is this node", from)
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
		s.log.Warn("adopted the sessions of a node that died", "from", from.Node, "from_epoch", from.Epoch, "sessions", len(ids))
	}
	s.sessions.resumeAll(ctx, ids)
	return len(ids), nil
}

// adoptOwn adopts what this node, at an earlier start, left unfinished
// (a node that starts again runs its tasks on, where a single node fails
// them), unless another node adopted it first.
func (s *Server) adoptOwn(ctx context.Context) error {
	owners, err := s.store.UnfinishedOwners(ctx)
	if err != nil {
		return err
	}
	for _, o := range owners {
		if o.Node != s.cfg.NodeID || o.Epoch == s.cfg.NodeEpoch {
			continue
		}
		if _, err := s.AdoptFrom(ctx, o.Node, o.Epoch); err != nil {
			return err
		}
	}
	return nil
}

// resumeAll runs on the adopted sessions ids. One that cannot be run on
// is ended, failed, saying why: adopted, it is no other node's to end.
func (m *sessionManager) resumeAll(ctx context.Context, ids []string) {
	for _, id := range ids {
		if err := m.resume(ctx, id); err != nil {
			m.log.Error("adopted session not run on; failing it", "session_id", id, "err", err)
			m.failAdopted(ctx, id, err)
		}
	}
}

// resume runs on the adopted session id from its last recorded step.
func (m *sessionManager) resume(ctx context.Context, id string) error {
	row, err := m.store.Session(ctx, id)
	if err != nil {
		return err
	}
	cmds, err := m.store.CommandsOfSession(ctx, id)
	if err != nil {
		return err
	}
	spec, err := m.resumedSpec(ctx, row)
	if err != nil {
		return err
	}
	switch row.Kind {
	case api.KindPlan:
		if spec.Plan, err = plan.Parse(row.Plan); err != nil {
			return fmt.Errorf("session %q: its plan: %w", id, err)
		}
		s, err := m.adopted(spec, row, cmds)
		if err != nil {
			return err
		}
		go m.runPlan(s, nil)
	case api.KindCommand:
		if len(cmds) != 1 {
			return fmt.Errorf("session %q: a single command's task has %d commands recorded", id, len(cmds))
		}
		c := cmds[0]
		spec.WaitForDevice = c.WaitForDevice
		s, err := m.adopted(spec, row, cmds)
		if err != nil {
			return err
		}
		go execute(m, s, commandRunner{sessionID: s.ID, deviceID: s.DeviceID, actions: c.Actions, timeout: c.Timeout,
			waitForDevice: c.WaitForDevice}, nil)
	default:
		return fmt.Errorf("session %q: a %s is not adopted; its devices' tasks are, each on its own", id, row.Kind)
	}
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
	err = m.unrecorded.write(ctx, keptWrite{what: "end of session " + id, size: keptFailureBytes,
		fn: func(tx *store.Tx) error { return tx.EndSession(row) }})
	if err != nil {
		m.log.Error("adopted session not failed", "session_id", id, "err", err)
	}
}
