package tasks

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/unrecorded"
	"github.com/edgeaip/edgeaip/server/plan"
)

// ResumeAll runs on the adopted sessions ids: fleets last, so that each
// finds its devices' tasks, adopted with it, running. One that cannot be
// run on is ended, failed, saying why: adopted, it is no other node's to
// end. ctx's values serve, not its end: the adoption is committed, so a
// deadline meant for it (a handoff's, a sweep's) that passed meanwhile,
// under a slow store, must not leave them adopted and neither run nor
// failed, which no other node would ever take up while this one lives.
func (m *SessionManager) ResumeAll(ctx context.Context, ids []string) {
	ctx = context.WithoutCancel(ctx)
	var fleets []store.Session
	for _, id := range ids {
		row, err := m.store.Sessions().Get(ctx, id)
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
func (m *SessionManager) resumed(ctx context.Context, id string, err error) {
	switch {
	case err == nil:
	case errors.Is(err, ErrShuttingDown):
		// This node stops too: once it has left, another adopts it.
		m.log.Warn("adopted session not run on: this node is stopping", "session_id", id)
	default:
		m.log.Error("adopted session not run on; failing it", "session_id", id, "err", err)
		m.failAdopted(ctx, id, err)
	}
}

// resume runs on the adopted session row from its last recorded step.
func (m *SessionManager) resume(ctx context.Context, row store.Session) error {
	cmds, err := m.store.Commands().OfSession(ctx, row.ID)
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
func (m *SessionManager) resumeCommand(spec SessionSpec, row store.Session, cmds []store.Command) error {
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
func (m *SessionManager) resumeFleet(ctx context.Context, spec SessionSpec, row store.Session) error {
	fleet, err := recordedFleet(row)
	if err != nil {
		return err
	}
	children, err := m.store.Sessions().Children(ctx, row.ID)
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
func (m *SessionManager) resumedSpec(ctx context.Context, row store.Session) (SessionSpec, error) {
	spec := SessionSpec{ID: row.ID, TaskName: row.TaskName, DeviceID: row.DeviceID, ParentID: row.ParentID,
		Requester:        api.Requester{Kind: row.RequesterKind, ID: row.RequesterID, Identity: row.Identity, TokenID: row.TokenID},
		OriginalTaskName: row.OriginalTaskName}
	if row.Identity == "" {
		return spec, nil // recorded before identities: the operator's
	}
	id, err := m.store.Identities().Get(ctx, row.Identity)
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
func (m *SessionManager) adopted(spec SessionSpec, row store.Session, cmds []store.Command) (*Session, error) {
	s := m.newSession(spec)
	s.createdAt, s.persisted = row.CreatedAt, row.Kind != api.KindCommand
	s.history = make(map[stepAttempt]store.Command, len(cmds))
	for _, c := range cmds {
		s.history[stepAttempt{c.Step, c.Attempt}] = c
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrShuttingDown
	}
	m.live[s.ID] = s
	m.wg.Add(1)
	return s, nil
}

// failAdopted ends the adopted session id, which could not be run on,
// failed with why.
func (m *SessionManager) failAdopted(ctx context.Context, id string, why error) {
	row, err := m.store.Sessions().Get(ctx, id)
	if err != nil {
		m.log.Error("adopted session not failed", "session_id", id, "err", err)
		return
	}
	row.Owner = m.owner()
	row.State, row.Error = string(api.StateFailed), fmt.Sprintf("adopted by %s, which could not run it on: %v", row.Owner, why)
	err = m.unrecorded.Record(ctx, unrecorded.Write{What: "end of session " + id, Size: unrecorded.FailureBytes,
		Fn: func(tx *store.Tx) error { return tx.Sessions().End(row) }})
	if err != nil {
		m.log.Error("adopted session not failed", "session_id", id, "err", err)
	}
}
