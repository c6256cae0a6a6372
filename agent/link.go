package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/google/uuid"
)

// Timeouts of the link.
const (
	registerTimeout = 10 * time.Second
	sendTimeout     = 10 * time.Second
)

// errUnauthorized means the server refused the device token.
var errUnauthorized = errors.New("server refused the device token (401): check --id and the token file")

// Run keeps the device linked to the server until ctx ends: it connects,
// registers, heartbeats and serves commands, and when the link drops it
// reconnects with exponential backoff and jitter, forever.
func (a *Agent) Run(ctx context.Context) error {
	b := backoff{base: 500 * time.Millisecond, max: 30 * time.Second}
	for {
		registered, err := a.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if registered {
			b.reset()
		}
		wait := b.next()
		a.log.Warn("link down; reconnecting", "err", err, "in", wait.Round(time.Millisecond))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// session runs one connection from dial to drop. It reports whether the
// device got registered, which resets the backoff.
func (a *Agent) session(ctx context.Context) (registered bool, err error) {
	conn, err := a.dial(ctx)
	if err != nil {
		return false, err
	}
	defer conn.CloseNow()
	if err := a.register(ctx, conn); err != nil {
		return false, err
	}
	a.log.Info("registered", "server", a.cfg.ServerURL, "wire", conn.Encoding())

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go a.heartbeat(ctx, conn)
	for {
		var m protocol.ServerMessage
		if err := conn.Read(ctx, &m); err != nil {
			return true, err
		}
		a.handle(ctx, conn, &m)
	}
}

func (a *Agent) dial(ctx context.Context) (*protocol.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	opts := a.cfg.Conn
	opts.Reject, opts.Logger = protocol.ClientErrorReply(a.cfg.ID), a.log
	conn, resp, err := protocol.Dial(dctx, a.cfg.ServerURL, protocol.DialOptions{
		Header:      http.Header{"Authorization": {"Bearer " + a.token}},
		Encoding:    a.cfg.Wire,
		ConnOptions: opts,
	})
	if resp != nil && resp.StatusCode == http.StatusUnauthorized {
		return nil, errUnauthorized
	}
	return conn, err
}

// register sends REGISTER and waits for the ack: a HEARTBEAT with status ok.
func (a *Agent) register(ctx context.Context, conn *protocol.Conn) error {
	rctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	if err := conn.Send(rctx, a.registerMessage()); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	var ack protocol.ServerMessage
	if err := conn.Read(rctx, &ack); err != nil {
		return fmt.Errorf("register: waiting for ack: %w", err)
	}
	if ack.Type != protocol.ServerHeartbeat || ack.Status != protocol.StatusOK {
		conn.Close(websocket.StatusNormalClosure, "registration refused")
		return fmt.Errorf("register: refused by server: %s %s: %s", ack.Type, ack.Status, ack.Error)
	}
	return nil
}

// registerMessage describes the device and its tools. The modules refused
// at startup are listed in custom_metadata.refused_tools, so that the
// operator sees why a tool is missing.
func (a *Agent) registerMessage() *protocol.ClientMessage {
	info := systemInfo(a.cfg.ID, a.cfg.Labels, a.computer.ListTools("", "", false))
	if len(a.refused) > 0 {
		refused := make([]any, len(a.refused))
		for i, r := range a.refused {
			refused[i] = map[string]any{"path": r.Path, "error": r.Error}
		}
		info.CustomMetadata["refused_tools"] = refused
	}
	return &protocol.ClientMessage{
		Type:       protocol.ClientRegister,
		Status:     protocol.StatusOK,
		ClientType: protocol.ClientDevice,
		ClientID:   a.cfg.ID,
		Timestamp:  protocol.Now(),
		Metadata:   map[string]any{protocol.MetadataSystemInfo: info, "platform": info.Platform},
	}
}

func (a *Agent) heartbeat(ctx context.Context, conn *protocol.Conn) {
	t := time.NewTicker(a.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		var msg *protocol.ClientMessage
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			msg = &protocol.ClientMessage{
				Type: protocol.ClientHeartbeat, Status: protocol.StatusOK,
				ClientID: a.cfg.ID, Timestamp: protocol.Now(),
			}
		case <-a.inventory:
			// A registered connection that registers again updates the
			// device's inventory on the server.
			msg = a.registerMessage()
		}
		if err := a.send(ctx, conn, msg); err != nil {
			a.log.Warn("heartbeat not sent", "err", err)
			return
		}
	}
}

// handle dispatches one message. It never blocks on a tool: commands run in
// their own goroutines, so heartbeats keep flowing while tools run.
func (a *Agent) handle(ctx context.Context, conn *protocol.Conn, m *protocol.ServerMessage) {
	switch m.Type {
	case protocol.ServerCommand:
		go a.runCommand(ctx, conn, m)
	case protocol.ServerHeartbeat:
		a.log.Debug("heartbeat acknowledged")
	case protocol.ServerError:
		a.log.Warn("server reported an error", "error", m.Error, "response_id", m.ResponseID)
	default:
		a.log.Warn("message type not handled by this agent", "type", m.Type)
		a.send(ctx, conn, &protocol.ClientMessage{
			Type: protocol.ClientError, Status: protocol.StatusError, ClientID: a.cfg.ID,
			Error: fmt.Sprintf("message type %q is not handled by this agent", m.Type), Timestamp: protocol.Now(),
		})
	}
}

func (a *Agent) runCommand(ctx context.Context, conn *protocol.Conn, m *protocol.ServerMessage) {
	select {
	case a.slots <- struct{}{}:
		defer func() { <-a.slots }()
	case <-ctx.Done():
		return
	}
	// Every line about a command names it: device (a.log's), session,
	// response and call ids.
	log := a.log.With("session_id", m.SessionID, "response_id", m.ResponseID)
	calls := joinCallIDs(m.Actions)
	log.Info("command received", "actions", len(m.Actions), "call_id", calls)
	results := a.router.withLogger(log).Execute(ctx, m.Actions, true)
	status := m.Status
	if status == "" {
		status = protocol.StatusContinue
	}
	reply := &protocol.ClientMessage{
		Type:           protocol.ClientCommandResults,
		Status:         status,
		ClientID:       a.cfg.ID,
		SessionID:      m.SessionID,
		RequestID:      uuid.NewString(),
		PrevResponseID: m.ResponseID,
		ActionResults:  results,
		Timestamp:      protocol.Now(),
	}
	if err := a.send(ctx, conn, reply); err != nil {
		log.Error("results not delivered: link down", "call_id", calls, "err", err)
	}
}

func (a *Agent) send(ctx context.Context, conn *protocol.Conn, msg protocol.Message) error {
	sctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	return conn.Send(sctx, msg)
}
