package protocol

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testTimeout bounds every wait in these tests; it is a hang guard, not a
// timing assertion.
const testTimeout = 20 * time.Second

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// peer is the server's side of one test connection.
type peer struct {
	conn    *Conn
	raw     *countingConn
	got     chan ClientMessage // every message the server read
	readErr chan error         // the error that ended the server's read loop
}

// testServer accepts AIP connections on loopback and runs an echo on each:
// every message is answered with a heartbeat whose response_id is the
// message's request_id.
type testServer struct {
	t     *testing.T
	hs    *httptest.Server
	peers chan *peer
}

type connKey struct{}

func newTestServer(t *testing.T, opts ConnOptions, sndbuf int) *testServer {
	t.Helper()
	s := &testServer{t: t, peers: make(chan *peer, 16)}
	opts.Logger = quiet
	s.hs = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := Accept(w, r, opts)
		if err != nil {
			return
		}
		p := &peer{conn: conn, raw: r.Context().Value(connKey{}).(*countingConn), got: make(chan ClientMessage, 64), readErr: make(chan error, 1)}
		s.peers <- p
		echo(r.Context(), p)
	}))
	s.hs.Listener = &countingListener{Listener: s.hs.Listener, sndbuf: sndbuf}
	s.hs.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	s.hs.Start()
	t.Cleanup(s.hs.Close)
	return s
}

func echo(ctx context.Context, p *peer) {
	defer p.conn.CloseNow()
	for {
		var m ClientMessage
		if err := p.conn.Read(ctx, &m); err != nil {
			p.readErr <- err
			return
		}
		select {
		case p.got <- m:
		default:
		}
		reply := &ServerMessage{Type: ServerHeartbeat, Status: StatusOK, ResponseID: m.RequestID, Error: m.Error}
		if err := p.conn.Send(ctx, reply); err != nil {
			p.readErr <- err
			return
		}
	}
}

func (s *testServer) url() string { return "ws" + strings.TrimPrefix(s.hs.URL, "http") }

// dial connects a client with enc and returns both sides.
func (s *testServer) dial(enc Encoding, opts DialOptions) (*Conn, *peer) {
	s.t.Helper()
	opts.Encoding, opts.Logger = enc, quiet
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	c, _, err := Dial(ctx, s.url(), opts)
	require.NoError(s.t, err)
	s.t.Cleanup(func() { c.CloseNow() })
	select {
	case p := <-s.peers:
		return c, p
	case <-ctx.Done():
		s.t.Fatal("server never accepted the connection")
		return nil, nil
	}
}

// countingListener sets each accepted connection's send buffer and wraps
// it to watch its writes.
type countingListener struct {
	net.Listener
	sndbuf int
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if l.sndbuf > 0 {
		c.(*net.TCPConn).SetWriteBuffer(l.sndbuf)
	}
	return &countingConn{Conn: c}, nil
}

// countingConn reports the size of the write in progress, so that a test
// can tell a write is stuck: one larger than the socket buffers can hold
// while the peer reads nothing.
type countingConn struct {
	net.Conn
	inflight atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.inflight.Store(int64(len(p)))
	defer c.inflight.Store(0)
	return c.Conn.Write(p)
}

// recv waits for one value from ch, failing the test if none comes.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testTimeout):
		t.Fatalf("nothing arrived within %s", testTimeout)
		panic("unreachable")
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// exchange sends a heartbeat with request_id id and waits for its echo.
func exchange(t *testing.T, c *Conn, id string) {
	t.Helper()
	require.NoError(t, tryExchange(c, id))
}

// tryExchange is exchange for goroutines other than the test's.
func tryExchange(c *Conn, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := c.Send(ctx, &ClientMessage{Type: ClientHeartbeat, Status: StatusOK, RequestID: id}); err != nil {
		return err
	}
	var m ServerMessage
	if err := c.Read(ctx, &m); err != nil {
		return err
	}
	if m.Type != ServerHeartbeat || m.ResponseID != id {
		return fmt.Errorf("exchange %s: got %s %q: %s", id, m.Type, m.ResponseID, m.Error)
	}
	return nil
}

func sendRaw(t *testing.T, c *Conn, typ websocket.MessageType, b []byte) {
	t.Helper()
	require.NoError(t, c.ws.Write(ctxT(t), typ, b))
}

func frameTypeOf(e Encoding) websocket.MessageType {
	if e == JSON {
		return websocket.MessageText
	}
	return websocket.MessageBinary
}

func TestEncodingFollowsTheSubprotocol(t *testing.T) {
	s := newTestServer(t, ConnOptions{}, 0)
	for _, enc := range encodings {
		c, p := s.dial(enc, DialOptions{})
		assert.Equal(t, enc, c.Encoding())
		assert.Equal(t, enc, p.conn.Encoding())
		exchange(t, c, "id-"+enc.String())
	}
}

// hostile lists frames the server must refuse, each with the reason its
// ERROR reply must give. Each frame carries request_id "bad-1" where it can.
func hostile(t *testing.T) map[string]struct {
	in   frame
	want string
} {
	big := func(n int, item string) string {
		return strings.TrimSuffix(strings.Repeat(item+",", n), ",")
	}
	keys := make([]string, MaxMapPairs+1)
	for i := range keys {
		keys[i] = `"k` + strconv.Itoa(i) + `":0`
	}
	deep := `{"type":"heartbeat","status":"ok","request_id":"bad-1","metadata":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`
	arr := `{"type":"heartbeat","status":"ok","request_id":"bad-1","metadata":{"a":[` + big(MaxArrayElements+1, "0") + `]}}`
	obj := `{"type":"heartbeat","status":"ok","request_id":"bad-1","metadata":{` + strings.Join(keys, ",") + `}}`
	type c = struct {
		in   frame
		want string
	}
	return map[string]c{
		"missing type":        {both(t, `{"status":"ok","request_id":"bad-1"}`), `field "type": missing`},
		"missing status":      {both(t, `{"type":"heartbeat","request_id":"bad-1"}`), `field "status": missing`},
		"unknown type":        {both(t, `{"type":"dance","status":"ok","request_id":"bad-1"}`), `field "type": unknown value "dance"`},
		"unknown status":      {both(t, `{"type":"heartbeat","status":"sleepy","request_id":"bad-1"}`), `field "status": unknown value "sleepy"`},
		"unknown nested enum": {both(t, `{"type":"command_results","status":"ok","request_id":"bad-1","action_results":[{"status":"great"}]}`), `field "action_results[0].status": unknown value "great"`},
		"duplicate key": {frame{`{"type":"heartbeat","status":"ok","status":"ok"}`,
			cborMap(cborText("type"), cborText("heartbeat"), cborText("status"), cborText("ok"), cborText("status"), cborText("ok"))}, `duplicate key "status"`},
		"invalid UTF-8": {frame{"{\"type\":\"heartbeat\",\"status\":\"ok\",\"error\":\"\xc3\x28\"}",
			cborMap(cborText("type"), cborText("heartbeat"), cborText("status"), cborText("ok"), cborText("error"), []byte{0x62, 0xc3, 0x28})}, "invalid UTF-8"},
		"too deep":         {frame{deep, bigCBOR(t, deep)}, "nesting deeper than 32 levels"},
		"array too long":   {frame{arr, bigCBOR(t, arr)}, "array longer than 65536 elements"},
		"map too big":      {frame{obj, bigCBOR(t, obj)}, "map with more than 65536 pairs"},
		"not even a frame": {frame{`}{`, []byte{0xff, 0x00, 0x13}}, "malformed frame"},
		"a huge bad value, quoted back clipped": {both(t, `{"type":"`+strings.Repeat("é", 1<<20)+`","status":"ok"}`),
			`field "type": unknown value "` + strings.Repeat("é", 32) + `…"`},
	}
}

func TestHostileFramesAreAnsweredAndTheConnectionSurvives(t *testing.T) {
	s := newTestServer(t, ConnOptions{}, 0)
	for name, h := range hostile(t) {
		for _, enc := range encodings {
			t.Run(name+"/"+enc.String(), func(t *testing.T) {
				c, _ := s.dial(enc, DialOptions{})
				sendRaw(t, c, frameTypeOf(enc), h.in.in(enc))
				var reply ServerMessage
				require.NoError(t, c.Read(ctxT(t), &reply))
				assert.Equal(t, ServerError, reply.Type)
				assert.Equal(t, StatusError, reply.Status)
				assert.Contains(t, reply.Error, h.want)
				exchange(t, c, "good-1")
			})
		}
	}
}

func TestAFrameOfTheWrongKindIsAnswered(t *testing.T) {
	s := newTestServer(t, ConnOptions{}, 0)
	for _, enc := range encodings {
		c, _ := s.dial(enc, DialOptions{})
		other := websocket.MessageText
		if enc == JSON {
			other = websocket.MessageBinary
		}
		sendRaw(t, c, other, []byte(`{"type":"heartbeat","status":"ok"}`))
		var reply ServerMessage
		require.NoError(t, c.Read(ctxT(t), &reply))
		assert.Contains(t, reply.Error, enc.String()+" connection got a")
		exchange(t, c, "good-1")
	}
}

func TestTheErrorReplyNamesTheFrameItAnswers(t *testing.T) {
	s := newTestServer(t, ConnOptions{}, 0)
	c, _ := s.dial(JSON, DialOptions{})
	sendRaw(t, c, websocket.MessageText, []byte(`{"type":"heartbeat","status":"sleepy","request_id":"bad-7","session_id":"s-1"}`))
	var reply ServerMessage
	require.NoError(t, c.Read(ctxT(t), &reply))
	assert.Equal(t, "bad-7", reply.ResponseID)
	assert.Equal(t, "s-1", reply.SessionID)
}

// A client answers a bad server frame the same way, naming the command it
// could not take, so that a server can fail that command at once.
func TestAClientAnswersABadCommandWithItsResponseID(t *testing.T) {
	s := newTestServer(t, ConnOptions{}, 0)
	c, p := s.dial(CBOR, DialOptions{ConnOptions: ConnOptions{Reject: ClientErrorReply("kiosk-1")}})
	bad := both(t, `{"type":"command","status":"continue","response_id":"r-9","session_id":"s-9","actions":[{"tool_name":"x","tool_type":"magic"}]}`)
	require.NoError(t, p.conn.ws.Write(ctxT(t), websocket.MessageBinary, bad.cbor))
	go func() {
		var m ServerMessage
		c.Read(ctxT(t), &m) // answers the bad frame, then takes the echo
	}()
	got := recv(t, p.got)
	assert.Equal(t, ClientError, got.Type)
	assert.Equal(t, "kiosk-1", got.ClientID)
	assert.Equal(t, "r-9", got.PrevResponseID)
	assert.Equal(t, "s-9", got.SessionID)
	assert.Contains(t, got.Error, `field "actions[0].tool_type": unknown value "magic"`)
}

func TestGoodFramesAmongBadOnesAreAllDeliveredUntilTheBudgetCloses1008(t *testing.T) {
	s := newTestServer(t, ConnOptions{}, 0)
	for _, enc := range encodings {
		t.Run(enc.String(), func(t *testing.T) {
			c, p := s.dial(enc, DialOptions{})
			bad := both(t, `{"type":"heartbeat","status":"sleepy","request_id":"bad"}`).in(enc)
			for i := range MaxBadFrames - 1 {
				exchange(t, c, "good-"+strconv.Itoa(i))
				sendRaw(t, c, frameTypeOf(enc), bad)
				var reply ServerMessage
				require.NoError(t, c.Read(ctxT(t), &reply))
				require.Equal(t, ServerError, reply.Type, "bad frame %d is answered", i+1)
				require.Equal(t, "bad", reply.ResponseID)
			}
			exchange(t, c, "last-good")
			sendRaw(t, c, frameTypeOf(enc), bad)
			var reply ServerMessage
			err := c.Read(ctxT(t), &reply)
			require.Error(t, err)
			assert.Equal(t, websocket.StatusPolicyViolation, CloseStatus(err))
			assert.ErrorContains(t, recv(t, p.readErr), "10 malformed frames within 1m0s")
		})
	}
}

func TestAFrameOverTheCapClosesWith1009(t *testing.T) {
	s := newTestServer(t, ConnOptions{MaxFrameBytes: 1024}, 0)
	for _, enc := range encodings {
		c, p := s.dial(enc, DialOptions{})
		exchange(t, c, "fits")
		big := &ClientMessage{Type: ClientHeartbeat, Status: StatusOK, Error: strings.Repeat("x", 2000)}
		b, err := enc.Marshal(big)
		require.NoError(t, err)
		sendRaw(t, c, frameTypeOf(enc), b)
		var m ServerMessage
		err = c.Read(ctxT(t), &m)
		require.Error(t, err)
		assert.Equal(t, websocket.StatusMessageTooBig, CloseStatus(err), "%s: %v", enc, err)
		require.Error(t, recv(t, p.readErr))
		recv(t, p.conn.Done())
	}
}

func TestSendRefusesWhatIsInvalidOrTooBigAndKeepsTheConnection(t *testing.T) {
	s := newTestServer(t, ConnOptions{}, 0)
	c, _ := s.dial(CBOR, DialOptions{ConnOptions: ConnOptions{MaxFrameBytes: 512}})
	ctx := ctxT(t)
	assert.ErrorContains(t, c.Send(ctx, &ClientMessage{Status: StatusOK}), `field "type": missing`)
	err := c.Send(ctx, &ClientMessage{Type: ClientHeartbeat, Status: StatusOK, Error: strings.Repeat("x", 600)})
	assert.ErrorIs(t, err, ErrTooBig)
	select {
	case <-c.Done():
		t.Fatal("a refused send must not close the connection")
	default:
	}
	exchange(t, c, "still-up")
}

// A tool that prints bytes that are not text must not cost its result:
// the peer gets U+FFFD where the bytes were.
func TestSendReplacesInvalidUTF8(t *testing.T) {
	s := newTestServer(t, ConnOptions{}, 0)
	for _, enc := range encodings {
		c, p := s.dial(enc, DialOptions{})
		m := &ClientMessage{Type: ClientCommandResults, Status: StatusOK, Error: "tail cut mid-rune \xe2\x9c",
			ActionResults: []Result{{Status: ResultSuccess, Result: map[string]any{"out\xff": []any{"ok", "bad\xc3"}}}}}
		require.NoError(t, c.Send(ctxT(t), m))
		got := recv(t, p.got)
		assert.Equal(t, "tail cut mid-rune \ufffd\ufffd", got.Error, "%s: one U+FFFD per bad byte", enc)
		assert.Equal(t, map[string]any{"out\ufffd": []any{"ok", "bad\ufffd"}}, got.ActionResults[0].Result, enc)
		assert.Equal(t, "tail cut mid-rune \xe2\x9c", m.Error, "%s: the caller's message is left as it was", enc)
	}
}

// A frame encoded once is sent as it is, as often as needed: what an
// agent records is what the server gets.
func TestAFrameEncodedOnceIsSentAsItIs(t *testing.T) {
	s := newTestServer(t, ConnOptions{}, 0)
	for _, enc := range encodings {
		c, p := s.dial(enc, DialOptions{ConnOptions: ConnOptions{MaxFrameBytes: 512}})
		m := &ClientMessage{Type: ClientCommandResults, Status: StatusOK, RequestID: "r1", Error: "bad \xff",
			ActionResults: []Result{{Status: ResultSuccess, Result: map[string]any{"n": int64(1)}}}}
		f, err := enc.EncodeFrame(m, quiet)
		require.NoError(t, err)
		for range 2 {
			require.NoError(t, c.SendFrame(ctxT(t), f))
			got := recv(t, p.got)
			assert.Equal(t, "bad \ufffd", got.Error, "%s: fixed when encoded", enc)
			assert.Equal(t, map[string]any{"n": int64(1)}, got.ActionResults[0].Result, enc)
			var echo ServerMessage
			require.NoError(t, c.Read(ctxT(t), &echo))
		}
		clean := &ClientMessage{Type: ClientHeartbeat, Status: StatusOK, RequestID: "r2"}
		f, err = enc.EncodeFrame(clean, quiet)
		require.NoError(t, err)
		want, err := enc.Marshal(clean)
		require.NoError(t, err)
		assert.Equal(t, want, f.Data, "%s: the bytes Send writes", enc)

		other := CBOR
		if enc == CBOR {
			other = JSON
		}
		wrong, err := other.EncodeFrame(m, quiet)
		require.NoError(t, err)
		assert.ErrorContains(t, c.SendFrame(ctxT(t), wrong), "send: a "+other.String()+" frame on a "+enc.String()+" connection")
		big, err := enc.EncodeFrame(&ClientMessage{Type: ClientHeartbeat, Status: StatusOK, Error: strings.Repeat("x", 600)}, quiet)
		require.NoError(t, err)
		assert.ErrorIs(t, c.SendFrame(ctxT(t), big), ErrTooBig)
		_, err = enc.EncodeFrame(&ClientMessage{Status: StatusOK}, quiet)
		assert.ErrorContains(t, err, `field "type": missing`)
		exchange(t, c, "still-up")
	}
}

func TestCloseIsACleanHandshake(t *testing.T) {
	s := newTestServer(t, ConnOptions{}, 0)
	c, p := s.dial(JSON, DialOptions{})
	readErr := make(chan error, 1)
	go func() {
		var m ServerMessage
		readErr <- c.Read(context.Background(), &m)
	}()
	require.NoError(t, p.conn.Close(websocket.StatusNormalClosure, "server going down"))
	err := recv(t, readErr)
	assert.Equal(t, websocket.StatusNormalClosure, CloseStatus(err))
	assert.ErrorContains(t, err, "server going down")
	recv(t, c.Done())
	recv(t, p.conn.Done())
}

// stuck connects a client that never reads, over sockets with small
// buffers, and starts a 1 MiB send to it from the server that cannot
// finish. It returns the server's side once that send is stuck, and the
// channel that will carry the send's error.
func (s *testServer) stuck(sendCtx context.Context) (*peer, <-chan error) {
	s.t.Helper()
	var d net.Dialer
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			c.(*net.TCPConn).SetReadBuffer(4096)
		}
		return c, err
	}}}
	_, p := s.dial(CBOR, DialOptions{HTTPClient: client, ConnOptions: ConnOptions{PingInterval: -1}})
	errc := make(chan error, 1)
	go func() {
		errc <- p.conn.Send(sendCtx, &ServerMessage{Type: ServerTaskEnd, Status: StatusCompleted, Result: strings.Repeat("x", 1<<20)})
	}()
	require.Eventually(s.t, func() bool { return p.raw.inflight.Load() > 64<<10 },
		testTimeout, time.Millisecond, "the big send never got stuck")
	return p, errc
}

func TestAStuckPeerBlocksNoOtherConnection(t *testing.T) {
	s := newTestServer(t, ConnOptions{PingInterval: -1}, 4096)
	others := make([]*Conn, 3)
	for i := range others {
		others[i], _ = s.dial(JSON, DialOptions{})
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, sendErr := s.stuck(ctx)

	var wg sync.WaitGroup
	for i, c := range others {
		wg.Go(func() {
			for j := range 20 {
				if !assert.NoError(t, tryExchange(c, strconv.Itoa(i)+"-"+strconv.Itoa(j))) {
					return
				}
			}
		})
	}
	wg.Wait()
	assert.Greater(t, p.raw.inflight.Load(), int64(64<<10), "the stuck send was stuck all along")
	select {
	case err := <-sendErr:
		t.Fatalf("the stuck send ended early: %v", err)
	default:
	}

	// A second send to the stuck peer waits behind the first, and gives
	// up at its own deadline; failing, it drops the connection.
	sctx, scancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer scancel()
	err := p.conn.Send(sctx, &ServerMessage{Type: ServerHeartbeat, Status: StatusOK})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Error(t, recv(t, sendErr), "the first send ends with the connection")
	recv(t, p.conn.Done())
	exchange(t, others[0], "after")
}

func TestAStuckSendEndsWithItsContextAndDropsThePeer(t *testing.T) {
	s := newTestServer(t, ConnOptions{PingInterval: -1}, 4096)
	ctx, cancel := context.WithCancel(context.Background())
	p, sendErr := s.stuck(ctx)
	cancel()
	err := recv(t, sendErr)
	assert.ErrorIs(t, err, context.Canceled)
	recv(t, p.conn.Done())
	require.Error(t, recv(t, p.readErr), "the reader sees the connection gone")
}

func TestAStuckSendWithinATimeLimitEndsAtItAndDropsThePeer(t *testing.T) {
	s := newTestServer(t, ConnOptions{PingInterval: -1}, 4096)
	p, sendErr := s.stuck(context.Background())
	err := p.conn.SendWithin(50*time.Millisecond, &ServerMessage{Type: ServerHeartbeat, Status: StatusOK})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Error(t, recv(t, sendErr), "the first send ends with the connection")
	recv(t, p.conn.Done())
	require.Error(t, recv(t, p.readErr), "the reader sees the connection gone")
}

func TestASendWithinATimeLimitKeepsTheLinkAndItsOrder(t *testing.T) {
	s := newTestServer(t, ConnOptions{PingInterval: -1}, 0)
	c, p := s.dial(CBOR, DialOptions{})
	for i := range 50 {
		require.NoError(t, p.conn.SendWithin(time.Second,
			&ServerMessage{Type: ServerHeartbeat, Status: StatusOK, ResponseID: strconv.Itoa(i)}))
	}
	for i := range 50 {
		var m ServerMessage
		require.NoError(t, c.Read(ctxT(t), &m))
		assert.Equal(t, strconv.Itoa(i), m.ResponseID)
	}
	time.Sleep(1100 * time.Millisecond) // past every send's limit: none of them closes the link later
	exchange(t, c, "after")
}

func TestKeepaliveDropsADeadLink(t *testing.T) {
	s := newTestServer(t, ConnOptions{PingInterval: 20 * time.Millisecond}, 0)
	proxy := newFrameProxy(t, strings.TrimPrefix(s.hs.URL, "http://"))
	ctx := ctxT(t)
	c, _, err := Dial(ctx, "ws://"+proxy.addr(), DialOptions{ConnOptions: ConnOptions{PingInterval: -1, Logger: quiet}})
	require.NoError(t, err)
	defer c.CloseNow()
	p := <-s.peers
	exchange(t, c, "alive")
	go func() {
		var m ServerMessage
		c.Read(ctx, &m) // answers the server's pings while the link lives
	}()
	proxy.freeze()
	err = recv(t, p.readErr)
	require.Error(t, err)
	recv(t, p.conn.Done())
}

// frameTally counts what OnFrame reports, by direction.
type frameTally struct {
	mu            sync.Mutex
	frames, bytes map[FrameDirection]int
}

func (f *frameTally) observe(dir FrameDirection, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frames[dir]++
	f.bytes[dir] += n
}

func (f *frameTally) get(dir FrameDirection) (frames, bytes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frames[dir], f.bytes[dir]
}

func TestOnFrameSeesEveryFrameWithItsSize(t *testing.T) {
	client := &frameTally{frames: map[FrameDirection]int{}, bytes: map[FrameDirection]int{}}
	server := &frameTally{frames: map[FrameDirection]int{}, bytes: map[FrameDirection]int{}}
	s := newTestServer(t, ConnOptions{OnFrame: server.observe}, 0)
	c, _ := s.dial(CBOR, DialOptions{ConnOptions: ConnOptions{OnFrame: client.observe}})
	exchange(t, c, "a")
	exchange(t, c, "b")

	sent, err := CBOR.Marshal(&ClientMessage{Type: ClientHeartbeat, Status: StatusOK, RequestID: "a"})
	require.NoError(t, err)
	frames, bytes := client.get(FrameOut)
	assert.Equal(t, 2, frames)
	assert.Equal(t, 2*len(sent), bytes, "the size is the encoded frame's")
	inFrames, inBytes := server.get(FrameIn)
	assert.Equal(t, frames, inFrames)
	assert.Equal(t, bytes, inBytes)
	frames, bytes = client.get(FrameIn)
	assert.Equal(t, 2, frames)
	// The server counts a frame once its write returns, which may be
	// after the client has read it.
	require.Eventually(t, func() bool {
		outFrames, outBytes := server.get(FrameOut)
		return outFrames == frames && outBytes == bytes
	}, testTimeout, time.Millisecond)

	// A frame the server rejects was read all the same; its ERROR reply
	// was written.
	sendRaw(t, c, websocket.MessageText, []byte(`{}`))
	var m ServerMessage
	require.NoError(t, c.Read(ctxT(t), &m))
	assert.Equal(t, ServerError, m.Type)
	inFrames, inBytes = server.get(FrameIn)
	assert.Equal(t, 3, inFrames)
	assert.Equal(t, 2*len(sent)+2, inBytes)
	require.Eventually(t, func() bool { outFrames, _ := server.get(FrameOut); return outFrames == 3 }, testTimeout, time.Millisecond)
}
