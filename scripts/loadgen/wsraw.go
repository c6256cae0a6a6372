package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"golang.org/x/sys/unix"
)

// The WebSocket opcodes a simulated idle device handles (RFC 6455 5.2).
const (
	opText   = 0x1
	opBinary = 0x2
	opClose  = 0x8
	opPing   = 0x9
	opPong   = 0xa
)

// clientFrame is one masked frame from a client, FIN set.
func clientFrame(op byte, payload []byte) []byte {
	var mask [4]byte
	rand.Read(mask[:])
	out := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		out = append(out, 0x80|byte(n))
	case n <= 0xffff:
		out = append(out, 0x80|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, 0x80|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	out = append(out, mask[:]...)
	for i, b := range payload {
		out = append(out, b^mask[i%4])
	}
	return out
}

// serverFrame is a frame read from the server: unmasked.
type serverFrame struct {
	op      byte
	payload []byte
}

// nextFrame parses the first frame of b, and returns it and its length;
// n == 0 if b does not hold a whole frame yet.
func nextFrame(b []byte) (f serverFrame, n int, err error) {
	if len(b) < 2 {
		return f, 0, nil
	}
	if b[1]&0x80 != 0 {
		return f, 0, errors.New("masked frame from the server")
	}
	f.op = b[0] & 0x0f
	size, hdr := uint64(b[1]&0x7f), 2
	switch size {
	case 126:
		if len(b) < 4 {
			return f, 0, nil
		}
		size, hdr = uint64(binary.BigEndian.Uint16(b[2:])), 4
	case 127:
		if len(b) < 10 {
			return f, 0, nil
		}
		size, hdr = binary.BigEndian.Uint64(b[2:]), 10
	}
	if uint64(len(b)-hdr) < size {
		return f, 0, nil
	}
	end := hdr + int(size)
	f.payload = b[hdr:end]
	return f, end, nil
}

// handshake dials the server from src on a blocking socket, upgrades to
// WebSocket with subprotocol aip.cbor.v1 and the device's token, and
// registers it. It returns the socket, and any bytes read past the ack.
func handshake(src, dst netip.AddrPort, id, token string, keepalive time.Duration) (fd int, rest []byte, err error) {
	fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, nil, fmt.Errorf("socket: %w", err)
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
		}
	}()
	if err := setupSocket(fd, keepalive); err != nil {
		return -1, nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src.Addr().As4()}); err != nil {
		return -1, nil, fmt.Errorf("bind %s: %w", src.Addr(), err)
	}
	if err := connect(fd, dst); err != nil {
		return -1, nil, fmt.Errorf("connect %s: %w", dst, err)
	}
	var key [16]byte
	rand.Read(key[:])
	req := "GET /ws HTTP/1.1\r\nHost: " + dst.String() + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + base64.StdEncoding.EncodeToString(key[:]) + "\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Protocol: " + protocol.Subprotocol + "\r\nAuthorization: Bearer " + token + "\r\n\r\n"
	if err := writeAll(fd, []byte(req)); err != nil {
		return -1, nil, fmt.Errorf("upgrade: %w", err)
	}
	resp, err := readUntil(fd, nil, func(b []byte) int {
		if i := bytes.Index(b, []byte("\r\n\r\n")); i >= 0 {
			return i + 4
		}
		return 0
	})
	if err != nil {
		return -1, nil, fmt.Errorf("upgrade: %w", err)
	}
	if !bytes.HasPrefix(resp, []byte("HTTP/1.1 101")) {
		return -1, nil, fmt.Errorf("upgrade refused: %q", bytes.SplitN(resp, []byte("\r\n"), 2)[0])
	}
	reg, err := protocol.CBOR.Marshal(registerMessage(id))
	if err != nil {
		return -1, nil, err
	}
	if err := writeAll(fd, clientFrame(opBinary, reg)); err != nil {
		return -1, nil, fmt.Errorf("register: %w", err)
	}
	var ack serverFrame
	b, err := readUntil(fd, nil, func(b []byte) int {
		f, n, _ := nextFrame(b)
		ack = f
		return n
	})
	if err != nil {
		return -1, nil, fmt.Errorf("register: waiting for ack: %w", err)
	}
	var m protocol.ServerMessage
	if err := protocol.CBOR.Unmarshal(ack.payload, &m); err != nil || m.Type != protocol.ServerHeartbeat {
		return -1, nil, fmt.Errorf("register: not acknowledged: %s %v", m.Type, err)
	}
	_, n, _ := nextFrame(b)
	return fd, b[n:], nil
}

// setupSocket sets what Go's dialer sets (TCP_NODELAY), a read timeout
// for the handshake, and TCP keepalive as the agent under test would.
func setupSocket(fd int, keepalive time.Duration) error {
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return err
	}
	tv := unix.NsecToTimeval((10 * time.Second).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	if keepalive <= 0 {
		return nil
	}
	secs := int(keepalive.Seconds())
	for _, o := range [][3]int{{unix.SOL_SOCKET, unix.SO_KEEPALIVE, 1}, {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE, secs},
		{unix.IPPROTO_TCP, unix.TCP_KEEPINTVL, secs}} {
		if err := unix.SetsockoptInt(fd, o[0], o[1], o[2]); err != nil {
			return err
		}
	}
	return nil
}

// connect connects blocking socket fd to dst. A signal (Go's runtime
// sends them to preempt goroutines) interrupts a blocking connect with
// EINTR while the connection goes on: it is then waited for.
func connect(fd int, dst netip.AddrPort) error {
	err := unix.Connect(fd, &unix.SockaddrInet4{Addr: dst.Addr().As4(), Port: int(dst.Port())})
	if !errors.Is(err, unix.EINTR) {
		return err
	}
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}, 10_000)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return err
		}
		if soErr != 0 {
			return unix.Errno(soErr)
		}
		return nil
	}
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if errors.Is(err, unix.EINTR) {
			continue // interrupted before anything was written
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// readUntil reads from fd, appending to b, until done says how much of it
// makes a whole message (> 0), and returns all that was read.
func readUntil(fd int, b []byte, done func([]byte) int) ([]byte, error) {
	buf := make([]byte, 4096)
	for done(b) == 0 {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errors.New("connection closed")
		}
		b = append(b, buf[:n]...)
	}
	return b, nil
}

// sourceAddrs are the loopback addresses the idle links dial from: one
// address to one server port gives at most the ephemeral port range.
func sourceAddrs(links, perAddr int) []netip.AddrPort {
	n := (links + perAddr - 1) / perAddr
	out := make([]netip.AddrPort, n)
	for i := range n {
		out[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, byte(i / 250), byte(i%250 + 2)}), 0)
	}
	return out
}

// pingPayload is the payload of the n-th ping, as coder/websocket writes
// them: the counter in decimal.
func pingPayload(n int64) []byte { return strconv.AppendInt(nil, n, 10) }
