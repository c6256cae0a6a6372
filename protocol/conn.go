package protocol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// Defaults for [ConnOptions].
const (
	DefaultMaxFrameBytes = 4 << 20
	DefaultPingInterval  = 15 * time.Second
	// Bad frames tolerated per BadFrameWindow before the connection closes
	// with 1008 (policy violation).
	MaxBadFrames   = 10
	BadFrameWindow = time.Minute
)

// ConnOptions tunes a [Conn]. The zero value gives the defaults.
type ConnOptions struct {
	// MaxFrameBytes caps one frame; a larger one closes the connection with
	// 1009 (message too big). Default DefaultMaxFrameBytes.
	MaxFrameBytes int64
	// PingInterval is how often a WebSocket ping checks the link. A ping
	// unanswered within the same interval closes the connection, so a dead
	// link is noticed within two intervals. Default DefaultPingInterval;
	// negative disables pings.
	PingInterval time.Duration
	// Reject builds the ERROR message sent back for a frame that failed to
	// decode. If nil, bad frames are only counted.
	Reject func(err error) any
	// Logger receives transport events. Default slog.Default().
	Logger *slog.Logger
}

func (o ConnOptions) withDefaults() ConnOptions {
	if o.MaxFrameBytes <= 0 {
		o.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if o.PingInterval == 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Conn is one AIP connection over WebSocket. One goroutine calls Read in a
// loop; Send may be called from any goroutine, and sends are serialized.
type Conn struct {
	ws   *websocket.Conn
	enc  Encoding
	opts ConnOptions

	sendMu sync.Mutex
	bad    []time.Time // times of recent bad frames; owned by the reader
	done   chan struct{}
	once   sync.Once
}

// ServerErrorReply is a [ConnOptions.Reject] for the server side: it answers
// a bad frame with a ServerMessage of type error.
func ServerErrorReply(err error) any {
	return &ServerMessage{Type: ServerError, Status: StatusError, Error: err.Error(), Timestamp: Now()}
}

// ClientErrorReply is a [ConnOptions.Reject] for the client side.
func ClientErrorReply(clientID string) func(error) any {
	return func(err error) any {
		return &ClientMessage{Type: ClientError, Status: StatusError, ClientID: clientID, Error: err.Error(), Timestamp: Now()}
	}
}

// Accept upgrades an HTTP request to an AIP connection. The CBOR encoding is
// used when the client offers [Subprotocol], JSON otherwise.
func Accept(w http.ResponseWriter, r *http.Request, opts ConnOptions) (*Conn, error) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{Subprotocol}})
	if err != nil {
		return nil, fmt.Errorf("websocket accept: %w", err)
	}
	return newConn(ws, opts), nil
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
// HTTP response, so the caller can tell 401 from an outage.
func Dial(ctx context.Context, url string, opts DialOptions) (*Conn, *http.Response, error) {
	wo := &websocket.DialOptions{HTTPHeader: opts.Header, HTTPClient: opts.HTTPClient}
	if opts.Encoding == CBOR {
		wo.Subprotocols = []string{Subprotocol}
	}
	ws, resp, err := websocket.Dial(ctx, url, wo)
	if err != nil {
		return nil, resp, fmt.Errorf("dial %s: %w", url, err)
	}
	if opts.Encoding == CBOR && ws.Subprotocol() != Subprotocol {
		ws.Close(websocket.StatusProtocolError, "subprotocol "+Subprotocol+" required")
		return nil, resp, fmt.Errorf("dial %s: server did not accept subprotocol %s", url, Subprotocol)
	}
	return newConn(ws, opts.ConnOptions), resp, nil
}

func newConn(ws *websocket.Conn, opts ConnOptions) *Conn {
	opts = opts.withDefaults()
	ws.SetReadLimit(opts.MaxFrameBytes)
	enc := JSON
	if ws.Subprotocol() == Subprotocol {
		enc = CBOR
	}
	c := &Conn{ws: ws, enc: enc, opts: opts, done: make(chan struct{})}
	if opts.PingInterval > 0 {
		go c.keepalive()
	}
	return c
}

// Encoding reports the negotiated encoding.
func (c *Conn) Encoding() Encoding { return c.enc }

// Done is closed once the connection is closed, by either side.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Read returns the next valid message, decoded into m. Frames that fail to
// decode are answered with the Reject message and skipped; after
// MaxBadFrames within BadFrameWindow the connection closes with 1008. Any
// error returned means the connection is finished. ctx should live as long
// as the connection: coder/websocket closes the connection when a read's
// context ends.
func (c *Conn) Read(ctx context.Context, m Message) error {
	for {
		typ, data, err := c.ws.Read(ctx)
		if err != nil {
			c.markDone()
			return fmt.Errorf("read: %w", err)
		}
		if err = c.decode(typ, data, m); err == nil {
			return nil
		}
		if err := c.rejectFrame(ctx, err); err != nil {
			return err
		}
	}
}

func (c *Conn) decode(typ websocket.MessageType, data []byte, m Message) error {
	want := websocket.MessageBinary
	if c.enc == JSON {
		want = websocket.MessageText
	}
	if typ != want {
		return fmt.Errorf("%w: %s connection got a %s frame", ErrMalformed, c.enc, typ)
	}
	return c.enc.Unmarshal(data, m)
}

// rejectFrame answers a bad frame and enforces the bad-frame budget.
func (c *Conn) rejectFrame(ctx context.Context, cause error) error {
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
	if c.opts.Reject != nil {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := c.Send(sctx, c.opts.Reject(cause)); err != nil {
			return err
		}
	}
	return nil
}

// Send encodes v and writes it as one frame. If ctx ends first, the
// connection is closed: a peer that cannot take a frame in time is dead or
// too slow to keep.
func (c *Conn) Send(ctx context.Context, v any) error {
	data, err := c.enc.Marshal(v)
	if err != nil {
		return err
	}
	typ := websocket.MessageBinary
	if c.enc == JSON {
		typ = websocket.MessageText
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if err := c.ws.Write(ctx, typ, data); err != nil {
		c.markDone()
		return fmt.Errorf("send: %w", err)
	}
	return nil
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

func (c *Conn) markDone() { c.once.Do(func() { close(c.done) }) }

// keepalive pings the peer until the connection ends; an unanswered ping
// drops the connection so that Read returns and the owner can react.
func (c *Conn) keepalive() {
	t := time.NewTicker(c.opts.PingInterval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.PingInterval)
		err := c.ws.Ping(ctx)
		cancel()
		if err != nil {
			select {
			case <-c.done:
			default:
				c.opts.Logger.Warn("link dead: ping unanswered", "err", err)
				c.CloseNow()
			}
			return
		}
	}
}

// CloseStatus reports the WebSocket close code in err, or -1.
func CloseStatus(err error) websocket.StatusCode { return websocket.CloseStatus(err) }

// IsMalformed reports whether err is a rejected frame rather than a broken
// connection.
func IsMalformed(err error) bool { return errors.Is(err, ErrMalformed) }
