// Package link keeps the device linked to the server: it dials, registers
// the device, sends heartbeats and registers again when the tool
// inventory changes, hands each COMMAND to the executor, reconnects with
// backoff when the link drops, and delivers the outbox's results, as the
// bytes the outbox recorded, until the server acknowledges them.
package link

import (
	"context"
	"crypto/tls"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/agent/internal/backoff"
	"github.com/edgeaip/edgeaip/agent/internal/outbox"
	"github.com/edgeaip/edgeaip/agent/internal/reply"
	"github.com/edgeaip/edgeaip/internal/version"
	"github.com/edgeaip/edgeaip/protocol"
)

// Timeouts of the link.
const (
	registerTimeout = 10 * time.Second
	sendTimeout     = 10 * time.Second
)

// Options are what a Link needs to know of the device and the agent.
type Options struct {
	DeviceID string
	// Servers are the server's URLs, tried in turn; a host name stands
	// for each address it resolves to.
	Servers []string
	// Resolver looks the servers' host names up; nil: the system's.
	Resolver *net.Resolver
	// Pace spaces the attempts; zero: the defaults.
	Pace Pace
	// Tokens keeps the device token, if it has one.
	Tokens Tokens
	// TLS dials a wss:// server: the CAs its certificate is verified
	// against and the device's certificate. Nil: the defaults.
	TLS  *tls.Config
	Wire protocol.Encoding
	// Conn tunes each connection; its Reject and Logger are the link's.
	Conn      protocol.ConnOptions
	Heartbeat time.Duration
	// Describe is the device's system info and tool inventory, as REGISTER
	// carries them.
	Describe func() protocol.SystemInfo
	// Registered, if set, is told each time the server acknowledged a
	// registration.
	Registered func()
	// Commands takes each COMMAND. It must not block: the read loop calls
	// it.
	Commands func(*protocol.ServerMessage)
	// Cancel stops the command of a response_id, for a CANCEL_COMMAND,
	// saying why. It must not block either.
	Cancel func(responseID, why string)
	// Inventory is signalled when the tool inventory changed: the link
	// registers again with it.
	Inventory <-chan struct{}
}

// Tokens keeps the device token: the link connects with Token, and has
// Replace keep the new one the server rotates it to.
type Tokens interface {
	// Token is the token to connect with, "" if none.
	Token() string
	// Replace keeps token, durably, and returns where; Token returns it
	// from then on.
	Replace(token string) (path string, err error)
}

// Link is the device's link to the server. Run it once.
type Link struct {
	opts   Options
	outbox *outbox.Outbox
	cap    reply.Cap
	log    *slog.Logger
	tls    *tls.Config
	order  maphash.Seed // orders the servers' addresses for this link (round)

	mu         sync.Mutex
	conn       *protocol.Conn // the registered connection; nil while down
	num        uint64         // numbers each connection, for the outbox to tell what went out on which
	serverAcks atomic.Bool    // the server has acknowledged results
	wake       chan struct{}  // deliver what the outbox owes: after a registration, or while flushing
}

// New returns a link that delivers the results of ob, encoded under cap.
func New(opts Options, ob *outbox.Outbox, cap reply.Cap, log *slog.Logger) *Link {
	return &Link{opts: opts, outbox: ob, cap: cap, log: log, tls: opts.TLS, order: maphash.MakeSeed(), wake: make(chan struct{}, 1)}
}

// Run keeps the device linked to the server, reconnecting with
// exponential backoff and full jitter, and delivers results, until ctx
// ends. A connection up then is closed with a handshake.
func (l *Link) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { l.keepLinked(ctx) })
	wg.Go(func() { l.deliver(ctx) })
	wg.Wait()
}

// keepLinked connects, and reconnects, until ctx ends. It tries the
// servers in rounds (round), staying on one while it holds: a failed dial
// or a dropped link moves to the next after a short jittered gap, a
// failed round waits the backoff, and a draining server (close code 1012)
// sends its devices to the next spread over Pace.DrainSpread, without
// counting as a failure. The backoff starts over only once a link has
// stayed up for stableAfter: a server that closes the link right after
// registering the device (one whose frame cap is below ours, say) must
// not get a reconnection every half second.
func (l *Link) keepLinked(ctx context.Context) {
	if len(l.opts.Servers) == 0 {
		l.log.Error("no server to link to")
		return
	}
	pace := l.opts.Pace.withDefaults()
	b := backoff.Backoff{Base: pace.Base, Max: pace.Max}
	var last *target
	for {
		round := l.round(ctx, last)
		for i := range round {
			last = &round[i]
			up, err := l.session(ctx, *last)
			if ctx.Err() != nil {
				return
			}
			wait, newRound := l.pause(&b, pace, *last, up, err, i == len(round)-1)
			if !sleep(ctx, wait) {
				return
			}
			if newRound {
				break
			}
		}
	}
}

// pause is how long to wait after the link to t ended with err, having
// been up for up, and whether a new round starts after it: after a
// drain, after a stable link, and after the last server of a round
// (last). It logs why the link moves on.
func (l *Link) pause(b *backoff.Backoff, pace Pace, t target, up time.Duration, err error, last bool) (wait time.Duration, newRound bool) {
	switch {
	case draining(err):
		wait = jitter(pace.DrainSpread)
		l.log.Info("server draining; moving to the next", "server", t, "in", wait.Round(time.Millisecond))
		return wait, true
	case up >= l.stableAfter():
		b.Reset()
		wait = b.Next()
	case !last:
		wait = jitter(pace.Gap)
	default:
		wait = b.Next()
		l.log.Warn("link down; reconnecting", "server", t, "err", err, "to", "a new round, every server failed",
			"in", wait.Round(time.Millisecond), "attempt", b.Attempt())
		return wait, true
	}
	l.log.Warn("link down; reconnecting", "server", t, "err", err, "to", "the next server", "in", wait.Round(time.Millisecond))
	return wait, up >= l.stableAfter()
}

// sleep waits d, or until ctx ends: it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// stableAfter is how long a link must stay up for the reconnection backoff
// to start over: the time in which a dead link is noticed, so a link that
// lived through it was alive, whether it carried a ping or not.
func (l *Link) stableAfter() time.Duration {
	if d := l.opts.Conn.NoticedWithin(); d > 0 {
		return d
	}
	return protocol.ConnOptions{}.NoticedWithin()
}

// session runs one connection from dial to drop. It reports how long the
// device stayed registered on it.
func (l *Link) session(ctx context.Context, t target) (up time.Duration, err error) {
	conn, err := l.dial(ctx, t)
	if err != nil {
		return 0, err
	}
	defer conn.CloseNow()
	// From the upgrade on, an agent that stops says it goes away: the
	// server counts the device online once it has read REGISTER, before
	// its ack arrives here, and gives a link that merely dropped a grace.
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-ctx.Done():
			conn.Close(websocket.StatusGoingAway, "agent shutting down")
		case <-ended:
		}
	}()
	// REGISTER carries the inventory as it is now: a change signalled
	// before it needs no message of its own.
	select {
	case <-l.opts.Inventory:
	default:
	}
	early, err := l.register(ctx, conn)
	if err != nil {
		return 0, err
	}
	registered := time.Now()
	l.log.Info("registered", "server", t, "wire", conn.Encoding(), "version", version.Version())
	if l.opts.Registered != nil {
		l.opts.Registered()
	}
	num := l.setConn(conn)
	defer l.setConn(nil)
	notify(l.wake) // what the server has not acknowledged goes out again
	for _, m := range early {
		l.handle(ctx, conn, m)
	}

	hbCtx, stopHeartbeat := context.WithCancel(ctx)
	defer stopHeartbeat()
	go l.heartbeat(hbCtx, conn)
	// The read does not end with ctx: closing the link, above, ends it
	// after the closing handshake.
	readCtx := context.WithoutCancel(ctx)
	for {
		var m protocol.ServerMessage
		if err := conn.Read(readCtx, &m); err != nil {
			if protocol.CloseStatus(err) == websocket.StatusMessageTooBig {
				l.refusedAsTooBig(num, err)
			}
			return time.Since(registered), err
		}
		l.handle(ctx, conn, &m)
	}
}

// maxEarlyCommands bounds the COMMANDs kept while waiting for the ack of
// REGISTER.
const maxEarlyCommands = 1024

// register sends REGISTER and waits for the ack: a HEARTBEAT with status
// ok. A server may send COMMANDs before the ack, as soon as it counts the
// device online; they are returned, to be handled once registered. It
// does not end with ctx, which would drop the link without its closing
// handshake: when ctx ends, session closes the link with one, and that
// ends the wait.
func (l *Link) register(ctx context.Context, conn *protocol.Conn) ([]*protocol.ServerMessage, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), registerTimeout)
	defer cancel()
	if err := conn.Send(rctx, l.registerMessage()); err != nil {
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
func (l *Link) registerMessage() *protocol.ClientMessage {
	info := l.opts.Describe()
	return &protocol.ClientMessage{
		Type:       protocol.ClientRegister,
		Status:     protocol.StatusOK,
		ClientType: protocol.ClientDevice,
		ClientID:   l.opts.DeviceID,
		Timestamp:  protocol.Now(),
		Metadata:   map[string]any{protocol.MetadataSystemInfo: info, "platform": info.Platform},
	}
}

// heartbeat sends a HEARTBEAT every Heartbeat, if set, and REGISTER again
// whenever the tool inventory changes. Without heartbeats, the link's
// pings keep it alive (protocol.ConnOptions.PingInterval).
func (l *Link) heartbeat(ctx context.Context, conn *protocol.Conn) {
	var tick <-chan time.Time
	if l.opts.Heartbeat > 0 {
		t := time.NewTicker(l.opts.Heartbeat)
		defer t.Stop()
		tick = t.C
	}
	for {
		msg := &protocol.ClientMessage{Status: protocol.StatusOK, ClientID: l.opts.DeviceID}
		select {
		case <-ctx.Done():
			return
		case <-tick:
			msg.Type = protocol.ClientHeartbeat
		case <-l.opts.Inventory:
			// REGISTER on a registered link updates the device's
			// inventory on the server.
			msg = l.registerMessage()
			l.log.Info("tool inventory changed; registering again with it")
		}
		msg.Timestamp = protocol.Now()
		if err := l.send(ctx, conn, msg); err != nil {
			l.log.Warn("message not sent", "type", msg.Type, "err", err)
			return
		}
	}
}

// handle dispatches one message. It never blocks on a tool: commands run
// in the background, so heartbeats keep flowing while tools run.
func (l *Link) handle(ctx context.Context, conn *protocol.Conn, m *protocol.ServerMessage) {
	switch m.Type {
	case protocol.ServerCommand:
		l.opts.Commands(m)
	case protocol.ServerHeartbeat:
		// An ack: of a heartbeat, or of results, which the outbox may now
		// consider delivered.
		if r, ok := l.outbox.Delivered(m.ResponseID); ok {
			l.serverAcks.Store(true)
			r.Log(l.log).Debug("results acknowledged")
			return
		}
		l.log.Debug("heartbeat acknowledged")
	case protocol.ServerRotateToken:
		l.rotateToken(ctx, conn, m)
	case protocol.ServerCancelCommand:
		l.opts.Cancel(m.ResponseID, m.Error)
	case protocol.ServerError:
		if r, ok := l.outbox.Delivered(m.ResponseID); ok {
			r.Log(l.log).Error("server refused results; they are not sent again", "error", m.Error)
			return
		}
		// The server puts the request_id it answers in response_id.
		l.log.Warn("server reported an error", "error", m.Error, "request_id", m.ResponseID)
	default:
		l.log.Warn("message type not handled by this agent", "type", m.Type)
		msg := &protocol.ClientMessage{
			Type: protocol.ClientError, Status: protocol.StatusError, ClientID: l.opts.DeviceID,
			Error: fmt.Sprintf("message type %q is not handled by this agent", m.Type), Timestamp: protocol.Now(),
		}
		l.send(ctx, conn, msg)
	}
}

// rotateToken keeps the new token the server sent, for the next
// connection, and says whether it did: the server retires the old token
// once it hears so.
func (l *Link) rotateToken(ctx context.Context, conn *protocol.Conn, m *protocol.ServerMessage) {
	reply := &protocol.ClientMessage{Type: protocol.ClientTokenRotated, Status: protocol.StatusOK, ClientID: l.opts.DeviceID,
		PrevResponseID: m.ResponseID, Timestamp: protocol.Now()}
	path, err := l.opts.Tokens.Replace(m.Token)
	if err != nil {
		l.log.Error("new device token not kept; the old one stays", "err", err)
		reply.Status, reply.Error = protocol.StatusError, err.Error()
	} else {
		l.log.Info("device token rotated; the new one is used from the next connection", "path", path)
	}
	if err := l.send(ctx, conn, reply); err != nil {
		l.log.Warn("answer to the token rotation not sent; a new token kept is confirmed by the next connection, made with it", "err", err)
	}
}

// send writes msg within sendTimeout.
func (l *Link) send(ctx context.Context, conn *protocol.Conn, msg protocol.Message) error {
	sctx, cancel := sendContext(ctx)
	defer cancel()
	return conn.Send(sctx, msg)
}

// sendContext bounds a send by sendTimeout. It does not end with ctx: a
// write cut off midway drops the link without its closing handshake, and
// the link is closed in order when the agent stops.
func sendContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
}

// setConn makes conn the registered connection (nil: none), numbered
// anew, and returns its number: what went out on an earlier connection
// goes out again on this one unless the server acknowledged it.
func (l *Link) setConn(conn *protocol.Conn) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.conn = conn
	l.num++
	return l.num
}

// current is the registered connection, nil while down, and its number.
func (l *Link) current() (*protocol.Conn, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn, l.num
}

// notify signals ch without blocking; one pending signal is enough.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Tell sends msg, a notice the server may do without (a command's
// preparation), on the registered connection if there is one and its
// wire carries edgeaip's own messages (CBOR); otherwise it is dropped: a
// UFO server has no use for it, and a notice is not worth keeping for the
// next link. A send that fails is logged.
func (l *Link) Tell(ctx context.Context, msg *protocol.ClientMessage) {
	conn, _ := l.current()
	if conn == nil || conn.Encoding() != protocol.CBOR {
		return
	}
	if err := l.send(ctx, conn, msg); err != nil {
		l.log.Debug("notice not sent", "type", msg.Type, "response_id", msg.PrevResponseID, "err", err)
	}
}
