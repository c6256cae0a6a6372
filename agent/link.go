package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/protocol"
)

// Timeouts of the link.
const (
	registerTimeout = 10 * time.Second
	sendTimeout     = 10 * time.Second
)

// errUnauthorized means the server refused the device token.
var errUnauthorized = errors.New("server refused the device token (401): check --id and the token file")

// Run keeps the device linked to the server and serves commands until ctx
// ends; it reconnects with exponential backoff and full jitter, forever.
// When ctx ends it shuts down gracefully: it takes no new commands, lets
// those in flight finish within ShutdownGrace and cancels the rest, and
// delivers the outbox while the link is up. Run may be called once.
func (a *Agent) Run(ctx context.Context) error {
	// The default Computer starts its MCP servers now, so that the first
	// registration carries their tools.
	if _, err := a.computers.Get(ctx, Target{}); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	linkCtx, stopLink := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLink()
	var wg sync.WaitGroup
	wg.Go(func() { a.keepLinked(linkCtx) })
	wg.Go(func() { a.deliver(linkCtx) })
	wg.Go(func() { every(linkCtx, min(a.cfg.Outbox.MaxAge/4, time.Hour), a.pruneOutbox) })
	wg.Go(func() { every(linkCtx, computerIdleAfter/4, a.computers.evictIdle) })
	<-ctx.Done()
	a.shutdown()
	stopLink()
	wg.Wait()
	return nil
}

// keepLinked connects, and reconnects, until ctx ends. The backoff starts
// over only once a link has stayed up for linkStableAfter: a server that
// closes the link right after registering the device (one whose frame cap
// is below ours, say) must not get a reconnection every half second.
func (a *Agent) keepLinked(ctx context.Context) {
	b := backoff{base: 500 * time.Millisecond, max: 30 * time.Second}
	for {
		up, err := a.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if up >= a.linkStableAfter() {
			b.reset()
		}
		wait := b.next()
		a.log.Warn("link down; reconnecting", "err", err, "in", wait.Round(time.Millisecond), "attempt", b.attempt)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// linkStableAfter is how long a link must stay up for the reconnection
// backoff to start over: two ping intervals, the time in which a dead link
// is noticed, so a link that lived through it carried pings both ways.
func (a *Agent) linkStableAfter() time.Duration {
	ping := a.cfg.Conn.PingInterval
	if ping <= 0 {
		ping = protocol.DefaultPingInterval
	}
	return 2 * ping
}

// session runs one connection from dial to drop. It reports how long the
// device stayed registered on it.
func (a *Agent) session(ctx context.Context) (up time.Duration, err error) {
	conn, err := a.dial(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.CloseNow()
	// REGISTER carries the inventory as it is now: a change signalled
	// before it needs no message of its own.
	select {
	case <-a.inventory:
	default:
	}
	early, err := a.register(ctx, conn)
	if err != nil {
		return 0, err
	}
	registered := time.Now()
	a.log.Info("registered", "server", a.cfg.ServerURL, "wire", conn.Encoding())
	a.setLink(conn)
	defer a.setLink(nil)
	_, link := a.currentLink()
	notify(a.wake) // what the server has not acknowledged goes out again
	for _, m := range early {
		a.handle(ctx, conn, m)
	}

	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-ctx.Done():
			conn.Close(websocket.StatusGoingAway, "agent shutting down")
		case <-ended:
		}
	}()
	hbCtx, stopHeartbeat := context.WithCancel(ctx)
	defer stopHeartbeat()
	go a.heartbeat(hbCtx, conn)
	// The read does not end with ctx: closing the link, above, ends it
	// after the closing handshake.
	readCtx := context.WithoutCancel(ctx)
	for {
		var m protocol.ServerMessage
		if err := conn.Read(readCtx, &m); err != nil {
			if protocol.CloseStatus(err) == websocket.StatusMessageTooBig {
				a.refusedAsTooBig(link, err)
			}
			return time.Since(registered), err
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

// maxEarlyCommands bounds the COMMANDs kept while waiting for the ack of
// REGISTER.
const maxEarlyCommands = 1024

// register sends REGISTER and waits for the ack: a HEARTBEAT with status
// ok. A server may send COMMANDs before the ack, as soon as it counts the
// device online; they are returned, to be handled once registered.
func (a *Agent) register(ctx context.Context, conn *protocol.Conn) ([]*protocol.ServerMessage, error) {
	rctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	if err := conn.Send(rctx, a.registerMessage()); err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	var early []*protocol.ServerMessage
	for {
		m := new(protocol.ServerMessage)
		if err := conn.Read(rctx, m); err != nil {
			return nil, fmt.Errorf("register: waiting for ack: %w", err)
		}
		switch {
		case m.Type == protocol.ServerHeartbeat && m.Status == protocol.StatusOK:
			return early, nil
		case m.Type == protocol.ServerCommand && len(early) < maxEarlyCommands:
			early = append(early, m)
		default:
			conn.Close(websocket.StatusNormalClosure, "registration refused")
			return nil, fmt.Errorf("register: refused by server (%s, status %s): %s", m.Type, m.Status, m.Error)
		}
	}
}

// registerMessage describes the device and its tools.
func (a *Agent) registerMessage() *protocol.ClientMessage {
	info := a.systemInfo()
	return &protocol.ClientMessage{
		Type:       protocol.ClientRegister,
		Status:     protocol.StatusOK,
		ClientType: protocol.ClientDevice,
		ClientID:   a.cfg.ID,
		Timestamp:  protocol.Now(),
		Metadata:   map[string]any{protocol.MetadataSystemInfo: info, "platform": info.Platform},
	}
}

// systemInfo describes the device with the tools of its default Computer.
// The modules refused since start are listed in custom_metadata.
// refused_tools, so that the operator sees why a tool is missing.
func (a *Agent) systemInfo() protocol.SystemInfo {
	var tools []protocol.MCPToolInfo
	if c, err := a.computers.Get(context.Background(), Target{}); err == nil {
		tools = c.ListTools("", "", false)
	}
	info := systemInfo(a.cfg.ID, a.cfg.Labels, len(a.cfg.MCP) > 0, tools)
	if refusals := a.refusals(); len(refusals) > 0 {
		refused := make([]any, len(refusals))
		for i, r := range refusals {
			refused[i] = map[string]any{"path": r.Path, "error": r.Error}
		}
		info.CustomMetadata["refused_tools"] = refused
	}
	return info
}

// heartbeat sends a HEARTBEAT every HeartbeatInterval, and REGISTER again
// whenever the tool inventory changes.
func (a *Agent) heartbeat(ctx context.Context, conn *protocol.Conn) {
	t := time.NewTicker(a.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		msg := &protocol.ClientMessage{Status: protocol.StatusOK, ClientID: a.cfg.ID}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			msg.Type = protocol.ClientHeartbeat
		case <-a.inventory:
			// REGISTER on a registered link updates the device's
			// inventory on the server.
			msg = a.registerMessage()
			a.log.Info("tool inventory changed; registering again with it")
		}
		msg.Timestamp = protocol.Now()
		if err := a.send(ctx, conn, msg); err != nil {
			a.log.Warn("message not sent", "type", msg.Type, "err", err)
			return
		}
	}
}

// handle dispatches one message. It never blocks on a tool: commands run
// in the background, so heartbeats keep flowing while tools run.
func (a *Agent) handle(ctx context.Context, conn *protocol.Conn, m *protocol.ServerMessage) {
	switch m.Type {
	case protocol.ServerCommand:
		a.onCommand(m)
	case protocol.ServerHeartbeat:
		// An ack: of a heartbeat, or of results, which the outbox may now
		// consider delivered.
		if r := a.outbox.delivered(m.ResponseID); r != nil {
			a.serverAcks.Store(true)
			a.replyLog(r).Debug("results acknowledged")
			return
		}
		a.log.Debug("heartbeat acknowledged")
	case protocol.ServerError:
		if r := a.outbox.delivered(m.ResponseID); r != nil {
			a.replyLog(r).Error("server refused results; they are not sent again", "error", m.Error)
			return
		}
		// The server puts the request_id it answers in response_id.
		a.log.Warn("server reported an error", "error", m.Error, "request_id", m.ResponseID)
	default:
		a.log.Warn("message type not handled by this agent", "type", m.Type)
		a.send(ctx, conn, &protocol.ClientMessage{
			Type: protocol.ClientError, Status: protocol.StatusError, ClientID: a.cfg.ID,
			Error: fmt.Sprintf("message type %q is not handled by this agent", m.Type), Timestamp: protocol.Now(),
		})
	}
}

// send writes msg within sendTimeout. It does not end with ctx: a write
// cut off midway drops the link without its closing handshake, and the
// link is closed in order when the agent stops.
func (a *Agent) send(ctx context.Context, conn *protocol.Conn, msg protocol.Message) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	return conn.Send(sctx, msg)
}

// setLink makes conn the registered link (nil: none), numbered anew: what
// went out on an earlier link goes out again on this one unless the server
// acknowledged it.
func (a *Agent) setLink(conn *protocol.Conn) {
	a.linkMu.Lock()
	defer a.linkMu.Unlock()
	a.link = conn
	a.linkNum++
}

// currentLink is the registered link, nil while down, and its number.
func (a *Agent) currentLink() (*protocol.Conn, uint64) {
	a.linkMu.Lock()
	defer a.linkMu.Unlock()
	return a.link, a.linkNum
}
