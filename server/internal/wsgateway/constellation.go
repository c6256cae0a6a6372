package wsgateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/internal/tasks/planread"
)

// A constellation client is an orchestrator acting for an operator
// identity: it connects with that identity's token, registers with
// client_type constellation and the target_id of one online device in the
// identity's scope, and then asks for tasks on that device and reads its
// info, each message as the access policy allows the identity. Its
// TASK_ENDs come back to it alone; it is closed when its identity or
// token is revoked.

// constellation is a constellation client's link, and the operator
// identity it acts for.
type constellation struct {
	*dispatch.Link
	caller *identity.Caller
}

// registerConstellation checks a REGISTER sent with an operator token, for
// caller. A target outside the caller's scope is refused as one that is
// not connected.
func (g *Gateway) registerConstellation(ctx context.Context, m *protocol.ClientMessage, c *identity.Caller) (*dispatch.Link, error) {
	if m.ClientType != protocol.ClientConstellation {
		return nil, fmt.Errorf(`register: field "client_type": %q needs the device's own token; an operator token registers constellations only`, m.ClientType)
	}
	if err := identity.AllowMessage(c, m.Type); err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	inScope, err := g.inScope.Device(ctx, c, m.TargetID)
	if err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	_, err = g.store.Devices().Get(ctx, m.ClientID)
	switch {
	case err == nil:
		return nil, fmt.Errorf(`register: field "client_id": %q is an enrolled device; a constellation needs an id of its own`, m.ClientID)
	case !errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("register: %w", err)
	case m.TargetID == "":
		return nil, errors.New(`register: field "target_id": missing: a constellation registers with the device it drives`)
	case g.reg.Device(m.TargetID) == nil || !inScope:
		return nil, fmt.Errorf(`register: field "target_id": target device %q is not connected`, m.TargetID)
	}
	return &dispatch.Link{ID: m.ClientID, Type: protocol.ClientConstellation, Target: m.TargetID}, nil
}

// closeOnRevocation closes the constellation c's link when revoked, its
// identity's or token's revocation, is closed, until ctx ends.
func (g *Gateway) closeOnRevocation(ctx context.Context, c *constellation, revoked <-chan struct{}) {
	go func() {
		select {
		case <-revoked:
			g.log.Info("closing a revoked identity's constellation", "client_id", c.ID, "identity", c.caller.Name)
			c.Conn.Close(websocket.StatusPolicyViolation, "identity revoked")
		case <-ctx.Done():
		}
	}()
}

// serveConstellation reads a constellation's messages until it leaves.
func (g *Gateway) serveConstellation(ctx context.Context, c *constellation) {
	for {
		var m protocol.ClientMessage
		if err := c.Conn.Read(ctx, &m); err != nil {
			g.log.Info("constellation link ended", "client_id", c.ID, "err", err)
			return
		}
		if err := checkIdentity(c.Link, &m); err != nil {
			g.sendError(ctx, c.Conn, err.Error(), m.RequestID)
			continue
		}
		if err := g.allowLinkMessage(ctx, c, m.Type); err != nil {
			g.refuseMessage(ctx, c, &m, err)
			continue
		}
		switch m.Type {
		case protocol.ClientHeartbeat:
			g.sendAck(ctx, c.Conn, &m)
		case protocol.ClientTask:
			if err := g.startConstellationTask(ctx, c, &m); err != nil {
				g.refuseTask(ctx, c, &m, err)
			}
		case protocol.ClientDeviceInfoRequest:
			g.answerDeviceInfo(ctx, c, &m)
		case protocol.ClientTaskEnd:
			g.log.Debug("constellation acknowledged a task end", "client_id", c.ID, "session_id", m.SessionID)
		case protocol.ClientError:
			g.log.Warn("constellation reported an error", "client_id", c.ID, "error", m.Error)
		default:
			g.sendError(ctx, c.Conn, fmt.Sprintf("message type %q is not accepted from a constellation", m.Type), m.RequestID)
		}
	}
}

// allowLinkMessage checks a message of type t from the constellation c
// against the access policy: its identity's role, and, for a message
// about its target, that the target is still in its scope (a device
// revoked and enrolled again with other labels may not be), else it is
// refused as a target that is not connected.
func (g *Gateway) allowLinkMessage(ctx context.Context, c *constellation, t protocol.ClientMessageType) error {
	if err := identity.AllowMessage(c.caller, t); err != nil {
		return err
	}
	if ru, _ := identity.RuleFor(identity.MessageKey(t)); ru.Scope != identity.LinkTarget {
		return nil
	}
	in, err := g.inScope.Device(ctx, c.caller, c.Target)
	switch {
	case err != nil:
		return err
	case !in:
		return fmt.Errorf("target device %q is not connected", c.Target)
	}
	return nil
}

// refuseMessage answers a message the access policy refuses: a TASK as
// every TASK that cannot start, with a failed TASK_END; others with an
// ERROR.
func (g *Gateway) refuseMessage(ctx context.Context, c *constellation, m *protocol.ClientMessage, err error) {
	g.log.Warn("message refused", "client_id", c.ID, "identity", c.caller.Name, "type", m.Type, "err", err)
	if m.Type == protocol.ClientTask {
		g.refuseTask(ctx, c, m, err)
		return
	}
	g.sendError(ctx, c.Conn, err.Error(), m.RequestID)
}

// startConstellationTask starts a session on the constellation's target
// for a TASK, acknowledges it, and sends the TASK_END back to the
// constellation when the session ends.
func (g *Gateway) startConstellationTask(ctx context.Context, c *constellation, m *protocol.ClientMessage) error {
	name, original := g.wsTaskName(c, m.TaskName)
	p, err := planread.FromRequest(m.Request, g.cfg.MaxPlanBytes)
	if err != nil {
		return planread.InField("request", err)
	}
	if g.reg.Device(c.Target) == nil {
		return fmt.Errorf("target device %q is not connected", c.Target)
	}
	_, err = g.tasks.StartPlan(ctx, tasks.PlanTask{
		Asker: tasks.Asker{Who: c.caller, Kind: api.RequesterConstellation, Client: c.ID}, Device: c.Target, Plan: p,
		ID: m.SessionID, TaskName: name, OriginalTaskName: original, TaskEnd: g.taskEndTo(c), Announce: g.ackTask(c, m),
	})
	return err
}

// ackTask acknowledges the TASK m, once its session exists, to the
// constellation c.
func (g *Gateway) ackTask(c *constellation, m *protocol.ClientMessage) func(*tasks.Session) {
	return func(sess *tasks.Session) {
		g.send(c.Conn, &protocol.ServerMessage{
			Type: protocol.ServerHeartbeat, Status: protocol.StatusOK, SessionID: sess.ID, TaskName: sess.TaskName,
			Timestamp: protocol.Now(), ResponseID: ackID(m),
		})
	}
}

// taskEndTo delivers a TASK_END to the constellation asker on whatever
// connection it has when the task ends, as inscope.Sight shows the task
// to asker's identity.
func (g *Gateway) taskEndTo(asker *constellation) tasks.TaskEndFunc {
	return func(msg *protocol.ServerMessage) error {
		c := g.reg.Get(asker.ID)
		if c == nil || c.IsDevice() {
			return fmt.Errorf("requester %q is not connected", asker.ID)
		}
		shown, err := g.taskEndShown(asker, msg)
		if err != nil {
			return err
		}
		return g.send(c.Conn, shown)
	}
}

// taskEndShown is msg, a TASK_END with a plan's result on asker's
// target, as asker's identity may see it. The task has ended: it reads
// the store with a context of its own.
func (g *Gateway) taskEndShown(asker *constellation, msg *protocol.ServerMessage) (*protocol.ServerMessage, error) {
	sight, err := g.inScope.TaskSight(context.Background(), asker.caller, msg.SessionID)
	if err != nil || sight == nil {
		return msg, err
	}
	r, ok := msg.Result.(api.PlanResult)
	if !ok {
		return msg, nil
	}
	shown := *msg
	shown.Result, shown.Error = sight.PlanEnd(asker.Target, r, msg.Error)
	return &shown, nil
}

// answerDeviceInfo answers a DEVICE_INFO_REQUEST about the constellation's
// own target, to the constellation alone.
func (g *Gateway) answerDeviceInfo(ctx context.Context, c *constellation, m *protocol.ClientMessage) {
	dev := g.reg.Device(c.Target)
	if dev == nil || dev.Info.Load() == nil {
		g.sendError(ctx, c.Conn, fmt.Sprintf("device_info_request: no system info for target device %q: it is not connected or sent none", c.Target), m.RequestID)
		return
	}
	g.send(c.Conn, &protocol.ServerMessage{
		Type: protocol.ServerDeviceInfoResponse, Status: protocol.StatusOK, Result: inscope.Info(dev.Info.Load(), c.caller.Scope),
		Timestamp: protocol.Now(), ResponseID: m.RequestID,
	})
}
