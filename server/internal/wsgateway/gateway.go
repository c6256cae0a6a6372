// Package wsgateway serves GET /ws, the server's WebSocket endpoint: the
// device gateway, where agents link and deliver their results, and
// constellation clients (UFO's galaxy clients), which start tasks on a
// device over the same endpoint. It registers links in the dispatcher's
// registry, offers devices their rotated tokens, and keeps their
// last_seen; what it runs, it runs through the front door (tasks).
package wsgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/coder/websocket"
	"github.com/edgeaip/edgeaip/internal/authlimit"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/metrics"
	"github.com/google/uuid"
)

// Config is what the gateway needs from the server that holds it: its
// parts, and, as funcs, what only the wiring can do.
type Config struct {
	// Store records devices' info, last_seen, local calls and rotations.
	Store *store.Store
	// Registry holds the links the gateway registers; Dispatcher sends
	// commands on them and takes their results.
	Registry   *dispatch.Registry
	Dispatcher *dispatch.Dispatcher
	// Sessions hears of constellations and devices that are gone.
	Sessions Sessions
	// Tasks is the front door that constellations' TASKs go through.
	Tasks *tasks.FrontDoor
	// InScope says which devices a constellation's identity may drive.
	InScope *inscope.Checker
	// Auth authenticates links and watches constellations' identities
	// for revocation, and settles token rotations.
	Auth *identity.Authority
	// AuthLimit finds a request's source and whether it failed too often.
	AuthLimit *authlimit.Limiter
	// Metrics counts frames and local calls; Logger takes the logs.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Conn tunes the links; Liveness checks every link for silence.
	Conn     protocol.ConnOptions
	Liveness *protocol.Liveness
	// MaxPlanBytes bounds a constellation's plan (tasks.Limits).
	MaxPlanBytes int

	// RefuseWhileDraining answers 503 to a device link on a draining
	// node, and reports whether it did.
	RefuseWhileDraining func(w http.ResponseWriter, what string) bool
	// AuthFailed counts a failed authentication with token from src on
	// surface; TooManyFailures answers 429 to a source refused for wait
	// seconds more.
	AuthFailed      func(src netip.Addr, surface, token string)
	TooManyFailures func(w http.ResponseWriter, surface string, wait int)
	// DevicesChanged tells the other surfaces that a device came, went or
	// changed its tools.
	DevicesChanged func()
	// DeviceLinked is told of device id registered, or registered again
	// with a new inventory, once the store holds its info: the rollouts
	// bring it to their revisions.
	DeviceLinked func(id string)
}

// Sessions is what the gateway tells the session manager
// (tasks.SessionManager): a requester or a device is gone.
type Sessions interface {
	// RequesterGone cancels the sessions the constellation clientID,
	// which left, asked for.
	RequesterGone(clientID string)
	// DeviceGone cancels the sessions on device id, which did not come
	// back within its grace.
	DeviceGone(id string)
}

// Gateway serves GET /ws (ServeHTTP) and holds the links it registered.
type Gateway struct {
	cfg       Config
	log       *slog.Logger
	store     *store.Store
	reg       *dispatch.Registry
	disp      *dispatch.Dispatcher
	sessions  Sessions
	tasks     *tasks.FrontDoor
	inScope   *inscope.Checker
	auth      *identity.Authority
	authLimit *authlimit.Limiter
	metrics   *metrics.Metrics
	liveness  *protocol.Liveness
	offers    *tokenOffers // the new tokens offered on device links (rotation.go)
}

// New returns a gateway over cfg's parts.
func New(cfg Config) *Gateway {
	return &Gateway{cfg: cfg, log: cfg.Logger, store: cfg.Store, reg: cfg.Registry, disp: cfg.Dispatcher, sessions: cfg.Sessions,
		tasks: cfg.Tasks, inScope: cfg.InScope, auth: cfg.Auth, authLimit: cfg.AuthLimit, metrics: cfg.Metrics,
		liveness: cfg.Liveness, offers: newTokenOffers()}
}

// registerTimeout is how long a new connection has to send REGISTER.
const registerTimeout = 10 * time.Second

// maxInFlightResults bounds the COMMAND_RESULTS of one connection being
// recorded at once: they are recorded concurrently, so that they share
// group commits, but a device cannot pile up goroutines.
const maxInFlightResults = 64

// ServeHTTP is GET /ws: it authenticates the token before the upgrade, then
// expects REGISTER, and serves the connection, once registered, from a
// goroutine of its own (serveLink). A wrong token counts toward its
// source's limit of failures. A client that offers only other versions
// of the CBOR wire is refused once authenticated (refuseWire).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.cfg.RefuseWhileDraining(w, "device link") {
		return
	}
	src := g.authLimit.Source(r)
	if wait := g.authLimit.Blocked(src); wait > 0 {
		g.cfg.TooManyFailures(w, metrics.SurfaceWebSocket, wait)
		return
	}
	p, err := g.auth.AuthClient(r)
	if err != nil {
		if errors.Is(err, identity.ErrWrongToken) {
			g.cfg.AuthFailed(src, metrics.SurfaceWebSocket, identity.RequestToken(r, true))
		}
		g.log.Warn("connection refused at upgrade", "remote", r.RemoteAddr, "err", err)
		http.Error(w, identity.PublicReason(err), http.StatusUnauthorized)
		return
	}
	if g.refuseWire(w, r, p) {
		return
	}
	var revoked <-chan struct{}
	stopWatch := func() {}
	if p.Operator != nil {
		// Watched from now: a revocation while it registers counts too.
		revoked, stopWatch = g.auth.Watch(p.Operator)
	}
	opts := g.cfg.Conn
	opts.Reject = protocol.ServerErrorReply
	opts.Logger = g.log.With("remote", r.RemoteAddr)
	opts.OnFrame = g.metrics.Frame
	opts.Liveness = g.liveness
	conn, err := protocol.Accept(w, r, opts)
	if err != nil {
		stopWatch()
		g.log.Warn("websocket upgrade failed", "remote", r.RemoteAddr, "err", err)
		return
	}
	// The link outlives the request, whose context net/http cancels once
	// this handler returns: what registering starts (a resend, a token
	// offer) must not end with it.
	ctx := context.WithoutCancel(r.Context())
	c, err := g.register(ctx, conn, p)
	if err != nil {
		stopWatch()
		g.log.Warn("registration refused", "remote", r.RemoteAddr, "err", err)
		g.sendError(ctx, conn, err.Error(), "")
		conn.Close(websocket.StatusPolicyViolation, "registration refused")
		conn.CloseNow()
		return
	}
	go g.serveLink(c, p.Operator, revoked, stopWatch)
}

// serveLink reads a registered client's messages until its link drops,
// and a constellation's until its identity is revoked (revoked; stopWatch
// ends the watch). It runs on a goroutine of its own, so that an idle
// link holds a stack only as deep as its read: the handler's goroutine,
// deep under net/http, returns once the client has registered, and with
// it the request and net/http's state for the connection. The link's
// context ends when serveLink returns, not with the request'g.
func (g *Gateway) serveLink(c *dispatch.Link, caller *identity.Caller, revoked <-chan struct{}, stopWatch func()) {
	defer stopWatch()
	defer c.Conn.CloseNow()
	if !c.IsDevice() {
		defer g.unregister(c, false)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cl := &constellation{Link: c, caller: caller}
		g.closeOnRevocation(ctx, cl, revoked)
		g.serveConstellation(ctx, cl)
		return
	}
	goingAway := false
	defer func() { g.unregister(c, goingAway) }()
	goingAway = g.serveDevice(context.Background(), c)
}

// register reads the REGISTER message, checks it against the token's
// principal, and makes the connection its client's current one.
func (g *Gateway) register(ctx context.Context, conn *protocol.Conn, p identity.Principal) (*dispatch.Link, error) {
	rctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	var m protocol.ClientMessage
	if err := conn.Read(rctx, &m); err != nil {
		return nil, fmt.Errorf("waiting for register: %w", err)
	}
	if m.Type != protocol.ClientRegister {
		return nil, fmt.Errorf("not registered: the first message must be %q, got %q", protocol.ClientRegister, m.Type)
	}
	if m.ClientID == "" {
		return nil, errors.New(`register: field "client_id": missing`)
	}
	var (
		c   *dispatch.Link
		err error
	)
	if p.Operator != nil {
		c, err = g.registerConstellation(ctx, &m, p.Operator)
	} else {
		c, err = registerDevice(p.Device, &m, g.log)
	}
	if err != nil {
		return nil, err
	}
	c.Conn = conn
	if c.IsDevice() {
		// Recorded before it is seen online, so that an online device
		// always has its info and last_seen in the store.
		g.recordInfo(ctx, c)
		if err := g.disp.Leases().Take(ctx, c); err != nil {
			return nil, err
		}
	}
	if c.IsDevice() {
		g.offers.add(c)
	}
	if old := g.reg.Add(c); old != nil {
		g.log.Info("client reconnected; closing its stale link", "client_id", c.ID)
		go old.Conn.Close(websocket.StatusPolicyViolation, "superseded by a new connection")
	}
	if err := g.send(conn, registrationAck(&m)); err != nil {
		g.unregister(c, false)
		return nil, fmt.Errorf("ack: %w", err)
	}
	if c.IsDevice() {
		go g.disp.Resend(c)
		g.disp.Leases().Announce(c)
		g.log.Info("device registered", "device", c.ID, "wire", conn.Encoding(), "tools", toolCount(c.Info.Load()))
		g.cfg.DevicesChanged()
		g.cfg.DeviceLinked(c.ID)
		go g.registered(ctx, c)
	} else {
		g.log.Info("constellation registered", "client_id", c.ID, "target", c.Target, "wire", conn.Encoding())
	}
	return c, nil
}

// registrationAck is the ack of a REGISTER: a HEARTBEAT with status ok.
func registrationAck(m *protocol.ClientMessage) *protocol.ServerMessage {
	return &protocol.ServerMessage{Type: protocol.ServerHeartbeat, Status: protocol.StatusOK, Timestamp: protocol.Now(), ResponseID: ackID(m)}
}

// ackID is the response_id of the ack of m: m's request_id, or, as UFO's
// server always gives one (RegistrationProtocol.send_registration_confirmation,
// AIPProtocol.send_ack), a fresh one when m has none, as the REGISTER and
// TASK of UFO's clients do not.
func ackID(m *protocol.ClientMessage) string {
	if m.RequestID != "" {
		return m.RequestID
	}
	return uuid.NewString()
}

// registerDevice checks a device's REGISTER against its token.
func registerDevice(dev *store.Device, m *protocol.ClientMessage, log *slog.Logger) (*dispatch.Link, error) {
	switch {
	case m.ClientType != protocol.ClientDevice:
		return nil, fmt.Errorf(`register: field "client_type": %q is not allowed with a device token`, m.ClientType)
	case m.ClientID != dev.ID:
		return nil, fmt.Errorf(`register: field "client_id": %q does not match the device token's device %q`, m.ClientID, dev.ID)
	case m.TargetID != "" && m.TargetID != dev.ID:
		return nil, fmt.Errorf(`register: field "target_id": device %q may not target %q`, dev.ID, m.TargetID)
	}
	c := &dispatch.Link{ID: dev.ID, Type: protocol.ClientDevice}
	c.Info.Store(systemInfoOf(m.Metadata, log.With("device", dev.ID)))
	return c, nil
}

// unregister forgets a connection that ended. A device whose link it
// was is then between links, for its grace; or, if its agent closed the
// link on purpose as it stopped (goingAway), shut down (see the registry).
func (g *Gateway) unregister(c *dispatch.Link, goingAway bool) {
	g.offers.forget(c)
	removed, shutDown := g.reg.Remove(c, goingAway)
	if !removed {
		// Superseded (the client is online on a new connection) or
		// revoked (taken offline by disconnect).
		g.disp.LinkDropped(c, false)
		return
	}
	if c.IsDevice() {
		g.disp.LinkDropped(c, shutDown)
		if shutDown {
			g.disp.Leases().ShutDown(c.ID)
		}
		g.cfg.DevicesChanged()
		g.RecordLastSeen(context.Background(), []*dispatch.Link{c})
		if shutDown {
			g.log.Info("device shut down: its agent closed the link as it stopped", "device", c.ID)
		} else {
			g.log.Info("device disconnected", "device", c.ID, "grace", g.reg.Grace())
		}
		return
	}
	g.sessions.RequesterGone(c.ID)
	g.log.Info("constellation disconnected", "client_id", c.ID)
}

// GraceEnded gives up on a device whose link dropped and which did not
// come back within its grace: the commands waiting on it are not sent
// again, and the sessions on it are cancelled as device_disconnected.
func (g *Gateway) GraceEnded(id string) {
	if g.disp.Leases().HeldElsewhere(id) {
		g.log.Info("device's grace here ended; it is linked to another node", "device", id)
		g.disp.Leases().Drop(id, 0)
		return
	}
	g.log.Info("device did not come back within its grace", "device", id, "grace", g.reg.Grace())
	g.disp.Abandon(id)
	g.sessions.DeviceGone(id)
	g.disp.Leases().Release(id)
}

// serveDevice reads a device's messages until the link drops, and
// reports whether the agent closed it on purpose, going away as it
// stopped (1001). Then the results it sent before are recorded before it
// returns: what is still waiting after them, the agent did not take.
func (g *Gateway) serveDevice(ctx context.Context, c *dispatch.Link) (goingAway bool) {
	inFlight := make(chan struct{}, maxInFlightResults)
	for {
		var m protocol.ClientMessage
		if err := c.Conn.Read(ctx, &m); err != nil {
			g.log.Info("device link ended", "device", c.ID, "err", err)
			if protocol.CloseStatus(err) != websocket.StatusGoingAway {
				return false
			}
			for range cap(inFlight) {
				inFlight <- struct{}{}
			}
			return true
		}
		if err := checkIdentity(c, &m); err != nil {
			g.sendError(ctx, c.Conn, err.Error(), m.RequestID)
			continue
		}
		if m.Type == protocol.ClientCommandResults {
			inFlight <- struct{}{}
			go func() {
				defer func() { <-inFlight }()
				g.deliverResults(ctx, c, &m)
			}()
			continue
		}
		g.handleDeviceMessage(ctx, c, &m)
	}
}

// checkIdentity refuses a message that claims to come from, or be for,
// someone other than its connection allows.
func checkIdentity(c *dispatch.Link, m *protocol.ClientMessage) error {
	switch {
	case m.ClientID != "" && m.ClientID != c.ID:
		return fmt.Errorf(`field "client_id": %q is not this connection's client %q`, m.ClientID, c.ID)
	case c.IsDevice() && m.ClientType == protocol.ClientConstellation:
		return fmt.Errorf(`field "client_type": %q: this connection is device %q`, m.ClientType, c.ID)
	case c.IsDevice() && m.TargetID != "" && m.TargetID != c.ID:
		return fmt.Errorf(`field "target_id": device %q may not target %q`, c.ID, m.TargetID)
	case !c.IsDevice() && m.TargetID != "" && m.TargetID != c.Target:
		return fmt.Errorf(`field "target_id": %q is not the target %q this constellation registered with`, m.TargetID, c.Target)
	}
	return nil
}

func (g *Gateway) handleDeviceMessage(ctx context.Context, c *dispatch.Link, m *protocol.ClientMessage) {
	switch m.Type {
	case protocol.ClientHeartbeat:
		// Heard, as every frame is: last_seen follows (last_seen.go).
		g.sendAck(ctx, c.Conn, m)
	case protocol.ClientRegister:
		g.reregister(ctx, c, m)
	case protocol.ClientTokenRotated:
		g.rotationAnswered(ctx, c, m)
	case protocol.ClientLocalCall:
		g.localCall(ctx, c, m)
	case protocol.ClientPreparing:
		g.disp.Preparing(c.ID, m.PrevResponseID, *m.Preparing)
	case protocol.ClientError:
		if m.PrevResponseID == "" {
			g.log.Warn("device reported an error", "device", c.ID, "session_id", m.SessionID, "error", m.Error)
			return
		}
		if !g.rotationRefused(ctx, c, m) {
			g.disp.Refused(ctx, c, m)
		}
	default:
		g.sendError(ctx, c.Conn, fmt.Sprintf("message type %q is not accepted from a device", m.Type), m.RequestID)
	}
}

// deliverResults records COMMAND_RESULTS and acknowledges them, so that
// the device may forget them; see server/RATIONALE.md.
func (g *Gateway) deliverResults(ctx context.Context, c *dispatch.Link, m *protocol.ClientMessage) {
	g.answerResults(ctx, c.Conn, m, g.disp.Deliver(c, m))
}

// answerResults tells a device how its results m ended, err being what
// deliver said: acknowledged, or refused for good. Results the server has
// not recorded get no answer: the device keeps them, and sends them again
// after its next registration, unless the server, which kept them,
// records them first and answers then (AnswerRecorded).
func (g *Gateway) answerResults(ctx context.Context, conn *protocol.Conn, m *protocol.ClientMessage, err error) {
	var refused *dispatch.DeliveryError
	switch {
	case err == nil:
		g.sendAck(ctx, conn, m)
	case errors.As(err, &refused):
		g.sendError(ctx, conn, err.Error(), m.RequestID)
	}
}

// AnswerRecorded answers results the server kept, once the store took
// them (err is deliver's error for them), on the device's link if it is
// online: it need not register again to hear.
func (g *Gateway) AnswerRecorded(deviceID string, m *protocol.ClientMessage, err error) {
	if c := g.reg.Device(deviceID); c != nil {
		g.answerResults(context.Background(), c.Conn, m, err)
	}
}

// reregister takes a REGISTER on a registered connection as an update of
// the device's system info, e.g. its tool inventory after a tool was
// deployed, and acknowledges it as the first.
func (g *Gateway) reregister(ctx context.Context, c *dispatch.Link, m *protocol.ClientMessage) {
	c.Info.Store(systemInfoOf(m.Metadata, g.log.With("device", c.ID)))
	g.recordInfo(ctx, c)
	g.log.Info("device inventory updated", "device", c.ID, "tools", toolCount(c.Info.Load()))
	g.cfg.DevicesChanged()
	g.cfg.DeviceLinked(c.ID)
	g.sendAck(ctx, c.Conn, m)
}

// recordInfo keeps a device's system info and the wire of its link in the
// store, for when it is offline, and marks it seen. It need not be
// durable at once: the device's next registration brings them again.
func (g *Gateway) recordInfo(ctx context.Context, c *dispatch.Link) {
	var info json.RawMessage
	if si := c.Info.Load(); si != nil {
		info, _ = json.Marshal(si)
	}
	heard := c.Conn.LastHeard()
	err := g.store.WriteUnsynced(ctx, func(tx *store.Tx) error {
		if err := tx.Devices().See(c.ID, info, heard); err != nil {
			return err
		}
		return tx.Devices().LinkedOver(c.ID, c.Conn.Encoding().String())
	})
	if err != nil {
		g.log.Error("device info not recorded", "device", c.ID, "err", err)
		return
	}
	c.SeenAt.Store(heard.UnixNano())
}

// sendAck acknowledges m to its sender alone: a HEARTBEAT with status ok
// whose response_id is m's request_id.
func (g *Gateway) sendAck(ctx context.Context, conn *protocol.Conn, m *protocol.ClientMessage) {
	g.send(conn, &protocol.ServerMessage{
		Type: protocol.ServerHeartbeat, Status: protocol.StatusOK, SessionID: m.SessionID,
		Timestamp: protocol.Now(), ResponseID: m.RequestID,
	})
}

// send sends m on conn within sendTimeout, whatever becomes of the
// request or link that made the server send it.
func (g *Gateway) send(conn *protocol.Conn, m *protocol.ServerMessage) error {
	return conn.SendWithin(dispatch.SendTimeout, m)
}

// sendError answers with an ERROR whose response_id is the request_id of
// the message at fault, if it had one.
func (g *Gateway) sendError(ctx context.Context, conn *protocol.Conn, msg, requestID string) {
	g.send(conn, &protocol.ServerMessage{Type: protocol.ServerError, Status: protocol.StatusError, Error: msg, Timestamp: protocol.Now(), ResponseID: requestID})
}

// systemInfoOf reads the SystemInfo from register metadata. A device that
// sends none, or one we cannot read, still registers, without inventory.
func systemInfoOf(md map[string]any, log *slog.Logger) *protocol.SystemInfo {
	raw, ok := md[protocol.MetadataSystemInfo]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	var info protocol.SystemInfo
	if err == nil {
		err = json.Unmarshal(b, &info)
	}
	if err != nil {
		log.Warn("unreadable system_info in metadata", "err", err)
		return nil
	}
	return &info
}

func toolCount(info *protocol.SystemInfo) int {
	if info == nil {
		return 0
	}
	return len(info.Tools)
}
