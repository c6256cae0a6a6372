package protocol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
)

// Defaults for [ConnOptions].
const (
	DefaultMaxFrameBytes = 4 << 20
	// DefaultPingInterval, with its timeout of a fifth of it, notices a
	// dead link within 60 s, and costs an idle link one ping and its pong
	// every 50 s: about 300 KB a day on the wire.
	DefaultPingInterval = 50 * time.Second
	// Bad frames tolerated per BadFrameWindow before the connection closes
	// with 1008 (policy violation).
	MaxBadFrames   = 10
	BadFrameWindow = time.Minute
	// rejectTimeout bounds the ERROR reply to a bad frame.
	rejectTimeout = 10 * time.Second
)

// ErrTooBig is returned by [Conn.Send] for a message that encodes to more
// than the frame cap. Nothing is sent and the connection stays up.
var ErrTooBig = errors.New("message larger than the frame cap")

// ConnOptions tunes a [Conn]. The zero value gives the defaults.
type ConnOptions struct {
	// MaxFrameBytes caps one frame in both directions. A larger frame from
	// the peer closes the connection with 1009 (message too big); a larger
	// one to send fails with ErrTooBig. Default DefaultMaxFrameBytes.
	MaxFrameBytes int64
	// PingInterval is how long the link may be silent, nothing read from
	// the peer, before a WebSocket ping checks it: the dialing side pings
	// after PingInterval, the accepting side only after another half of
	// PingTimeout, so that on a link between two of ours only the dialing
	// side pings and the accepting side just answers; it pings peers that
	// keep a longer schedule of their own. A link silent for PingInterval
	// and PingTimeout together is closed as dead. Default
	// DefaultPingInterval; negative disables pings and the check.
	PingInterval time.Duration
	// PingTimeout is how long a ping may go unanswered. Default a fifth of
	// PingInterval, 10 s for the default, and at least a second (or
	// PingInterval, if that is shorter): a peer busy for a moment is not
	// dead.
	PingTimeout time.Duration
	// Liveness runs the pings and the check; nil gives the connection one
	// of its own. A server shares one among all its connections, so that
	// a link costs no goroutine of its own for them.
	Liveness *Liveness
	// Reject builds the message sent back for a frame that was rejected.
	// bad holds what the frame carried before it was found bad, if
	// anything, and for a server message the ids a lenient read of the
	// frame found, so that the reply can name what it answers. Default
	// ServerErrorReply for Accept and ClientErrorReply("") for Dial.
	Reject func(err error, bad Message) Message
	// Logger receives transport events. Default slog.Default().
	Logger *slog.Logger
	// OnFrame, if set, is told of each frame read or written, with its
	// size in bytes, e.g. for metrics. It is called on the reading or
	// sending goroutine, so it must not block.
	OnFrame func(dir FrameDirection, bytes int)
}

// FrameDirection says whether a frame was read (in) or written (out).
type FrameDirection string

// The values of FrameDirection.
const (
	FrameIn  FrameDirection = "in"
	FrameOut FrameDirection = "out"
)

func (o ConnOptions) withDefaults(reject func(error, Message) Message) ConnOptions {
	if o.MaxFrameBytes <= 0 {
		o.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if o.PingInterval == 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = max(o.PingInterval/5, min(o.PingInterval, time.Second))
	}
	if o.Reject == nil {
		o.Reject = reject
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Conn is one AIP connection over WebSocket. One goroutine calls Read in a
// loop; Send may be called from any goroutine. Sends are serialized by the
// WebSocket library under each caller's context, so a send stuck behind a
// slow peer holds up only that peer's other sends, and only until their
// own deadlines.
type Conn struct {
	ws   *websocket.Conn
	enc  Encoding
	opts ConnOptions

	bad  []time.Time // times of recent bad frames; owned by the reader
	done chan struct{}
	once sync.Once

	// Liveness: see ConnOptions.PingInterval.
	accepted bool         // the accepting side, which pings later
	heard    atomic.Int64 // unix ns when the peer was last heard from
	pinging  atomic.Bool  // a ping is out
	watched  watched      // guarded by the Liveness's lock
	own      *Liveness    // the Liveness this connection runs, if it was given none
}

// ServerErrorReply is the server side's [ConnOptions.Reject]: a
// ServerMessage of type error whose response_id is the bad frame's
// request_id, when it had one.
func ServerErrorReply(err error, bad Message) Message {
	reply := &ServerMessage{Type: ServerError, Status: StatusError, Error: err.Error(), Timestamp: Now()}
	if cm, ok := bad.(*ClientMessage); ok {
		reply.ResponseID, reply.SessionID = cm.RequestID, cm.SessionID
	}
	return reply
}

// ClientErrorReply is the client side's [ConnOptions.Reject]. A COMMAND
// whose response_id and call_ids could be read gets COMMAND_RESULTS from
// clientID with a failure for each call_id, never silence; anything else
// a ClientMessage of type error whose prev_response_id is the bad frame's
// response_id, when it had one (a server fails that command at once).
func ClientErrorReply(clientID string) func(error, Message) Message {
	return func(err error, bad Message) Message {
		sm, _ := bad.(*ServerMessage)
		if calls := knownCallIDs(sm); answeredByName(bad) && len(calls) > 0 {
			return &ClientMessage{
				Type: ClientCommandResults, Status: StatusContinue, ClientID: clientID, SessionID: sm.SessionID,
				RequestID: uuid.NewString(), PrevResponseID: sm.ResponseID, Timestamp: Now(),
				ActionResults: FailAll(calls, "the agent could not read the command: "+err.Error()),
			}
		}
		reply := &ClientMessage{Type: ClientError, Status: StatusError, ClientID: clientID, Error: err.Error(), Timestamp: Now()}
		if sm != nil {
			reply.PrevResponseID, reply.SessionID = sm.ResponseID, sm.SessionID
		}
		return reply
	}
}

// Accept upgrades an HTTP request to an AIP connection. The CBOR encoding is
// used when the client offers [Subprotocol], JSON otherwise.
func Accept(w http.ResponseWriter, r *http.Request, opts ConnOptions) (*Conn, error) {
	c := newConn(opts.withDefaults(ServerErrorReply))
	c.accepted = true
	ws, err := websocket.Accept(smallBuffers{w}, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol},
		OnPingReceived: c.heardPing, OnPongReceived: c.heardPong})
	if err != nil {
		return nil, fmt.Errorf("websocket accept: %w", err)
	}
	c.start(ws)
	return c, nil
}

// DialOptions tunes [Dial].
type DialOptions struct {
	// Header is sent with the upgrade request, e.g. Authorization.
	Header http.Header
	// Encoding selects CBOR (offering [Subprotocol]) or JSON (offering none).
	Encoding Encoding
	// HTTPClient performs the upgrade. Default http.DefaultClient.
	HTTPClient *http.Client
	ConnOptions
}

// Dial opens an AIP connection to url. On a refused upgrade it returns the
// HTTP response, so the caller can tell 401 from an outage. Its errors
// quote url as RedactURL gives it, so that they can be logged.
func Dial(ctx context.Context, url string, opts DialOptions) (*Conn, *http.Response, error) {
	c := newConn(opts.ConnOptions.withDefaults(ClientErrorReply("")))
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Transport: LinkTransport()}
	}
	wo := &websocket.DialOptions{HTTPHeader: opts.Header, HTTPClient: client,
		OnPingReceived: c.heardPing, OnPongReceived: c.heardPong}
	if opts.Encoding == CBOR {
		wo.Subprotocols = []string{Subprotocol}
	}
	ws, resp, err := websocket.Dial(ctx, url, wo)
	if err != nil {
		return nil, resp, fmt.Errorf("dial %s: %w", RedactURL(url), redactErr(err, url))
	}
	if opts.Encoding == CBOR && ws.Subprotocol() != Subprotocol {
		ws.Close(websocket.StatusProtocolError, "subprotocol "+Subprotocol+" required")
		return nil, resp, fmt.Errorf("dial %s: server did not accept subprotocol %s", RedactURL(url), Subprotocol)
	}
	c.start(ws)
	return c, resp, nil
}

func newConn(opts ConnOptions) *Conn {
	return &Conn{opts: opts, done: make(chan struct{}), watched: watched{index: -1}}
}

// start runs c on ws, and has its liveness checked from now on.
func (c *Conn) start(ws *websocket.Conn) {
	ws.SetReadLimit(c.opts.MaxFrameBytes)
	c.ws, c.enc = ws, JSON
	if ws.Subprotocol() == Subprotocol {
		c.enc = CBOR
	}
	c.heard.Store(time.Now().UnixNano())
	if c.opts.PingInterval <= 0 {
		return
	}
	if c.opts.Liveness == nil {
		c.own = NewLiveness()
		c.opts.Liveness = c.own
	}
	c.opts.Liveness.watch(c)
}

// Encoding reports the negotiated encoding.
func (c *Conn) Encoding() Encoding { return c.enc }

// Done is closed once the connection is closed, by either side.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Read returns the next valid message, decoded into m. A frame that is
// rejected (see [ErrMalformed]) is answered with the Reject message and
// skipped; after MaxBadFrames within BadFrameWindow the connection closes
// with 1008. Any error returned means the connection is finished. ctx
// should live as long as the connection: the WebSocket library closes the
// connection when a read's context ends.
func (c *Conn) Read(ctx context.Context, m Message) error {
	for {
		typ, data, err := c.ws.Read(ctx)
		if err != nil {
			c.markDone()
			return fmt.Errorf("read: %w", err)
		}
		c.hear()
		c.observe(FrameIn, len(data))
		if err = c.decode(typ, data, m); err == nil {
			return nil
		}
		if typ == c.frameType() {
			c.enc.readRefusedCommand(data, m)
		}
		if err := c.rejectFrame(ctx, err, m); err != nil {
			return err
		}
	}
}

func (c *Conn) decode(typ websocket.MessageType, data []byte, m Message) error {
	if typ != c.frameType() {
		reflect.ValueOf(m).Elem().SetZero() // nothing of an earlier message may answer for this frame
		return fmt.Errorf("%w: %s connection got a %s frame", ErrMalformed, c.enc, typ)
	}
	return c.enc.Unmarshal(data, m)
}

func (c *Conn) frameType() websocket.MessageType {
	if c.enc == JSON {
		return websocket.MessageText
	}
	return websocket.MessageBinary
}

// rejectFrame answers a bad frame and enforces the bad-frame budget. A
// COMMAND answered by name does not count: its sender learns which
// command failed, and sends it no more.
func (c *Conn) rejectFrame(ctx context.Context, cause error, bad Message) error {
	if answeredByName(bad) {
		c.opts.Logger.Warn("rejected frame; its command is answered by its response_id", "err", cause)
	} else if err := c.countBadFrame(cause); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, rejectTimeout)
	defer cancel()
	if err := c.Send(sctx, c.opts.Reject(cause, bad)); err != nil {
		return fmt.Errorf("answer a rejected frame: %w", err)
	}
	return nil
}

// countBadFrame counts a bad frame against the budget, and closes the
// connection with 1008 when it is spent.
func (c *Conn) countBadFrame(cause error) error {
	now := time.Now()
	kept := c.bad[:0]
	for _, t := range c.bad {
		if now.Sub(t) < BadFrameWindow {
			kept = append(kept, t)
		}
	}
	c.bad = append(kept, now)
	c.opts.Logger.Warn("rejected frame", "err", cause, "recent_bad_frames", len(c.bad))
	if len(c.bad) >= MaxBadFrames {
		c.Close(websocket.StatusPolicyViolation, "too many malformed frames")
		return fmt.Errorf("read: %d malformed frames within %s: %w", len(c.bad), BadFrameWindow, cause)
	}
	return nil
}

// Frame is one message encoded for the wire by [Encoding.EncodeFrame]:
// bytes that can be kept, measured and sent as they are, by
// [Conn.SendFrame], as many times as needed.
type Frame struct {
	Encoding Encoding
	Data     []byte
}

// EncodeFrame validates m and encodes it as [Conn.Send] sends it. Invalid
// UTF-8 in any string, which the peer would reject, is replaced by U+FFFD
// in a copy of m, with a warning to log.
func (e Encoding) EncodeFrame(m Message, log *slog.Logger) (Frame, error) {
	if err := m.Validate(); err != nil {
		return Frame{}, err
	}
	if err := e.carries(m); err != nil {
		return Frame{}, err
	}
	if bad := checkUTF8(m); bad != nil {
		log.Warn("invalid UTF-8 replaced before sending", "err", bad)
		var err error
		if m, err = withValidUTF8(m); err != nil {
			return Frame{}, err
		}
	}
	data, err := e.Marshal(m)
	if err != nil {
		return Frame{}, err
	}
	return Frame{Encoding: e, Data: data}, nil
}

// Send validates m, encodes it and writes it as one frame: EncodeFrame,
// then SendFrame. A message that fails validation or exceeds the frame
// cap is not sent, and the connection stays up. If the write fails or ctx
// ends first, the connection is closed: a peer that cannot take a frame
// in time is dead or too slow to keep.
func (c *Conn) Send(ctx context.Context, m Message) error {
	f, err := c.enc.EncodeFrame(m, c.opts.Logger)
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return c.SendFrame(ctx, f)
}

// SendWithin is Send bounded by a time limit instead of a context, for a
// message no caller waits to call off (an acknowledgement, a command
// whose caller waits for its results, not for its sending): if the frame
// is not written within d, the connection is closed and the error wraps
// context.DeadlineExceeded, as Send's would. It costs one timer per
// frame, where a context with a deadline costs that, the context, its
// channel and the WebSocket library's hook on it.
func (c *Conn) SendWithin(d time.Duration, m Message) error {
	f, err := c.enc.EncodeFrame(m, c.opts.Logger)
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	late := time.AfterFunc(d, func() { c.CloseNow() })
	err = c.SendFrame(context.Background(), f)
	if !late.Stop() {
		return fmt.Errorf("send: not written within %s: %w", d, context.DeadlineExceeded)
	}
	return err
}

// SendFrame writes f, encoded by EncodeFrame in the connection's
// encoding, as one frame, as Send does. A frame of the other encoding, or
// over the frame cap, is not sent, and the connection stays up.
func (c *Conn) SendFrame(ctx context.Context, f Frame) error {
	if f.Encoding != c.enc {
		return fmt.Errorf("send: a %s frame on a %s connection", f.Encoding, c.enc)
	}
	if int64(len(f.Data)) > c.opts.MaxFrameBytes {
		return fmt.Errorf("send: %w: %d bytes, cap %d", ErrTooBig, len(f.Data), c.opts.MaxFrameBytes)
	}
	if err := c.ws.Write(ctx, c.frameType(), f.Data); err != nil {
		c.CloseNow()
		return fmt.Errorf("send: %w", err)
	}
	c.observe(FrameOut, len(f.Data))
	return nil
}

func (c *Conn) observe(dir FrameDirection, n int) {
	if c.opts.OnFrame != nil {
		c.opts.OnFrame(dir, n)
	}
}

// Close performs the closing handshake with code and reason.
func (c *Conn) Close(code websocket.StatusCode, reason string) error {
	defer c.markDone()
	return c.ws.Close(code, reason)
}

// CloseNow drops the connection without a handshake.
func (c *Conn) CloseNow() error {
	defer c.markDone()
	return c.ws.CloseNow()
}

// markDone marks c closed, and stops checking it.
func (c *Conn) markDone() {
	c.once.Do(func() {
		close(c.done)
		if c.opts.Liveness != nil {
			c.opts.Liveness.unwatch(c)
		}
		if c.own != nil {
			// Not Close: this may run on its goroutine, which closed c.
			c.own.halt()
		}
	})
}

// LastHeard is when anything was last read from the peer: a frame, a ping
// or a pong.
func (c *Conn) LastHeard() time.Time { return time.Unix(0, c.heard.Load()) }

func (c *Conn) hear() { c.heard.Store(time.Now().UnixNano()) }

// heardPing is the WebSocket library's hook for a ping read: the peer is
// alive, and gets its pong.
func (c *Conn) heardPing(context.Context, []byte) bool {
	c.hear()
	return true
}

// heardPong is the hook for a pong read.
func (c *Conn) heardPong(context.Context, []byte) { c.hear() }

// pingAfter is how long c may be silent before its Liveness pings it.
func (c *Conn) pingAfter() time.Duration {
	if c.accepted {
		return c.opts.PingInterval + c.opts.PingTimeout/2
	}
	return c.opts.PingInterval
}

// NoticedWithin is how long a dead link may go unnoticed under o: its
// PingInterval and PingTimeout, with their defaults; 0 if pings are off.
func (o ConnOptions) NoticedWithin() time.Duration {
	o = o.withDefaults(nil)
	if o.PingInterval < 0 {
		return 0 // never, by pings
	}
	return o.PingInterval + o.PingTimeout
}

// CloseStatus reports the WebSocket close code in err, or -1.
func CloseStatus(err error) websocket.StatusCode { return websocket.CloseStatus(err) }

// IsMalformed reports whether err is a rejected frame rather than a broken
// connection.
func IsMalformed(err error) bool { return errors.Is(err, ErrMalformed) }
