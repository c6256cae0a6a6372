package protocol

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The server's connections read and write through small buffers of their
// own in place of net/http's: frames of every size go through whole,
// both ways.
func TestFramesOfEverySizeCrossTheSmallBuffers(t *testing.T) {
	s := newTestServer(t, ConnOptions{}, 0)
	c, p := s.dial(CBOR, DialOptions{})
	for _, n := range []int{0, 1, readBufferSize - 40, readBufferSize, 3 * readBufferSize, 70 << 10, 1 << 20} {
		ctx := ctxT(t)
		big := strings.Repeat("x", n)
		require.NoError(t, c.Send(ctx, &ClientMessage{Type: ClientHeartbeat, Status: StatusOK, RequestID: "r", Error: big}))
		var m ServerMessage
		require.NoError(t, c.Read(ctx, &m), "%d bytes", n)
		assert.Equal(t, big, m.Error, "%d bytes", n)
	}
	select {
	case <-p.conn.Done():
		t.Fatal("the server dropped the link")
	default:
	}
}

// Frames sent at once from many goroutines through the small write
// buffer, each split into its start and the rest, arrive whole, each
// once, and each sender's in its order: the writev vector the link's
// writer keeps is never shared by two frames.
func TestConcurrentFramesCrossTheSmallBuffersWhole(t *testing.T) {
	s := newTestServer(t, ConnOptions{PingInterval: -1}, 0)
	c, p := s.dial(CBOR, DialOptions{})
	const senders, each = 8, 25
	payload := func(g, i int) string { return strings.Repeat(strconv.Itoa(g), 20+(g*each+i)*13) }
	errs := make(chan error, senders)
	for g := range senders {
		go func() {
			for i := range each {
				m := &ServerMessage{Type: ServerHeartbeat, Status: StatusOK, ResponseID: fmt.Sprintf("%d-%d", g, i), Error: payload(g, i)}
				if err := p.conn.SendWithin(testTimeout, m); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	next := make([]int, senders)
	for range senders * each {
		var m ServerMessage
		require.NoError(t, c.Read(ctxT(t), &m))
		var g, i int
		_, err := fmt.Sscanf(m.ResponseID, "%d-%d", &g, &i)
		require.NoError(t, err, m.ResponseID)
		require.Equal(t, next[g], i, "sender %d's frames in order", g)
		require.Equal(t, payload(g, i), m.Error, "frame %s whole", m.ResponseID)
		next[g]++
	}
	for range senders {
		require.NoError(t, recv(t, errs))
	}
}

// A client may send its first frame right behind its upgrade request,
// before the answer: net/http has read it already when the connection is
// hijacked, and it must come first out of the small buffers.
func TestAFrameSentWithTheUpgradeRequestIsRead(t *testing.T) {
	s := newTestServer(t, ConnOptions{PingInterval: -1}, 0)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.hs.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testTimeout))
	var key [16]byte
	rand.Read(key[:])
	hb, err := CBOR.Marshal(&ClientMessage{Type: ClientHeartbeat, Status: StatusOK, RequestID: "early"})
	require.NoError(t, err)
	req := "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(key[:]) + "\r\nSec-WebSocket-Protocol: " + Subprotocol + "\r\n\r\n"
	_, err = conn.Write(append([]byte(req), maskedFrame(0x2, hb)...)) // one write: the frame is read with the request
	require.NoError(t, err)

	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	var head [2]byte
	_, err = io.ReadFull(br, head[:])
	require.NoError(t, err)
	require.Less(t, int(head[1]&0x7f), 126, "a short answer")
	payload := make([]byte, head[1]&0x7f)
	_, err = io.ReadFull(br, payload)
	require.NoError(t, err)
	var m ServerMessage
	require.NoError(t, CBOR.Unmarshal(payload, &m))
	assert.Equal(t, "early", m.ResponseID)
}

// maskedFrame is a client's frame of opcode op, FIN set.
func maskedFrame(op byte, payload []byte) []byte {
	out := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		out = append(out, 0x80|byte(n))
	default:
		out = append(out, 0x80|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	}
	var mask [4]byte
	rand.Read(mask[:])
	out = append(out, mask[:]...)
	masked := bytes.Clone(payload)
	for i := range masked {
		masked[i] ^= mask[i%4]
	}
	return append(out, masked...)
}
