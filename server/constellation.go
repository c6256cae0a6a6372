package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/plan"
	"github.com/google/uuid"
)

// A constellation client is an orchestrator acting for the operator: it
// connects with the operator token, registers with client_type
// constellation and the target_id of one online device, and then asks for
// tasks on that device and reads its info. Its TASK_ENDs come back to it
// alone.

// registerConstellation checks a REGISTER sent with the operator token.
func (s *Server) registerConstellation(ctx context.Context, m *protocol.ClientMessage) (*client, error) {
	if m.ClientType != protocol.ClientConstellation {
		return nil, fmt.Errorf(`register: field "client_type": %q needs the device's own token; the operator token registers constellations only`, m.ClientType)
	}
	_, err := s.store.Device(ctx, m.ClientID)
	switch {
	case err == nil:
		return nil, fmt.Errorf(`register: field "client_id": %q is an enrolled device; a constellation needs an id of its own`, m.ClientID)
	case !errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("register: %w", err)
	case m.TargetID == "":
		return nil, errors.New(`register: field "target_id": missing: a constellation registers with the device it drives`)
	case s.reg.device(m.TargetID) == nil:
		return nil, fmt.Errorf(`register: field "target_id": target device %q is not connected`, m.TargetID)
	}
	return &client{id: m.ClientID, typ: protocol.ClientConstellation, target: m.TargetID}, nil
}

// serveConstellation reads a constellation's messages until it leaves.
func (s *Server) serveConstellation(ctx context.Context, c *client) {
	for {
		var m protocol.ClientMessage
		if err := c.conn.Read(ctx, &m); err != nil {
			s.log.Info("constellation link ended", "client_id", c.id, "err", err)
			return
		}
		if err := checkIdentity(c, &m); err != nil {
			s.sendError(ctx, c.conn, err.Error(), m.RequestID)
			continue
		}
		switch m.Type {
		case protocol.ClientHeartbeat:
			s.sendAck(ctx, c.conn, &m)
		case protocol.ClientTask:
			if err := s.startConstellationTask(ctx, c, &m); err != nil {
				s.refuseTask(ctx, c, &m, err)
			}
		case protocol.ClientDeviceInfoRequest:
			s.answerDeviceInfo(ctx, c, &m)
		case protocol.ClientTaskEnd:
			s.log.Debug("constellation acknowledged a task end", "client_id", c.id, "session_id", m.SessionID)
		case protocol.ClientError:
			s.log.Warn("constellation reported an error", "client_id", c.id, "error", m.Error)
		case protocol.ClientCommandResults:
			s.sendError(ctx, c.conn, "command_results are accepted only from the device the command went to", m.RequestID)
		default:
			s.sendError(ctx, c.conn, fmt.Sprintf("message type %q is not accepted from a constellation", m.Type), m.RequestID)
		}
	}
}

// startConstellationTask starts a session on the constellation's target
// for a TASK, acknowledges it, and sends the TASK_END back to the
// constellation when the session ends.
func (s *Server) startConstellationTask(ctx context.Context, c *client, m *protocol.ClientMessage) error {
	name, original := s.wsTaskName(c, m.TaskName)
	p, err := planFromRequest(m.Request, s.cfg.Limits.MaxPlanBytes)
	if err != nil {
		return inField("request", err)
	}
	if s.reg.device(c.target) == nil {
		return fmt.Errorf("target device %q is not connected", c.target)
	}
	if err := s.admission.admit(planOrder(p, c.target)); err != nil {
		return err
	}
	spec := sessionSpec{
		ID: m.SessionID, TaskName: taskNameOf(name, p), DeviceID: c.target,
		Requester: api.Requester{Kind: api.RequesterConstellation, ID: c.id}, Plan: p, OriginalTaskName: original,
	}
	if spec.ID == "" {
		spec.ID = uuid.NewString()
	}
	sess, created, err := s.sessions.getOrCreateSession(ctx, spec)
	if err != nil {
		return err
	}
	if !created {
		return &sessionRunningError{spec.ID}
	}
	s.send(ctx, c.conn, &protocol.ServerMessage{
		Type: protocol.ServerHeartbeat, Status: protocol.StatusOK, SessionID: sess.ID, TaskName: sess.TaskName,
		Timestamp: protocol.Now(), ResponseID: ackID(m),
	})
	s.sessions.executeTaskAsync(sess, s.taskEndTo(c.id))
	return nil
}

// taskEndTo delivers a TASK_END to the constellation clientID on whatever
// connection it has when the task ends.
func (s *Server) taskEndTo(clientID string) taskEndFunc {
	return func(msg *protocol.ServerMessage) error {
		c := s.reg.get(clientID)
		if c == nil || c.isDevice() {
			return fmt.Errorf("requester %q is not connected", clientID)
		}
		return s.send(context.Background(), c.conn, msg)
	}
}

// answerDeviceInfo answers a DEVICE_INFO_REQUEST about the constellation's
// own target, to the constellation alone.
func (s *Server) answerDeviceInfo(ctx context.Context, c *client, m *protocol.ClientMessage) {
	dev := s.reg.device(c.target)
	if dev == nil || dev.info.Load() == nil {
		s.sendError(ctx, c.conn, fmt.Sprintf("device_info_request: no system info for target device %q: it is not connected or sent none", c.target), m.RequestID)
		return
	}
	s.send(ctx, c.conn, &protocol.ServerMessage{
		Type: protocol.ServerDeviceInfoResponse, Status: protocol.StatusOK, Result: dev.info.Load(),
		Timestamp: protocol.Now(), ResponseID: m.RequestID,
	})
}

// planFromRequest reads the plan a request carries. UFO's requests are
// prose for an LLM; this server has no planner, so a request must be a
// plan (YAML or JSON).
func planFromRequest(request string, maxExpanded int) (*plan.Plan, error) {
	if request == "" {
		return nil, errors.New("empty task content")
	}
	p, err := parsePlan([]byte(request), maxExpanded)
	var refused *refusal
	if err != nil && !errors.As(err, &refused) {
		return nil, fmt.Errorf("not a plan (this server runs plans, not prose): %w", err)
	}
	return p, err
}

// taskNameOf is the task's name: the one asked for, else the plan's, else
// a fresh one.
func taskNameOf(asked string, p *plan.Plan) string {
	switch {
	case asked != "":
		return asked
	case p.TaskName != "":
		return p.TaskName
	}
	return uuid.NewString()
}
