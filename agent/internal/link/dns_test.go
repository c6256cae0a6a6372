package link

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// dnsServer answers every A question on loopback UDP with the addresses
// it is given, and every other question with none: enough DNS for Go's
// own resolver, which the link then uses as the system's, pointed here.
type dnsServer struct {
	conn net.PacketConn

	mu    sync.Mutex
	addrs []netip.Addr
}

func newDNSServer(t *testing.T, addrs ...netip.Addr) *dnsServer {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	d := &dnsServer{conn: conn, addrs: addrs}
	go d.serve()
	t.Cleanup(func() { conn.Close() })
	return d
}

// answer makes addrs the answer from now on.
func (d *dnsServer) answer(addrs ...netip.Addr) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.addrs = addrs
}

// resolver is a Go resolver that asks d.
func (d *dnsServer) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dialer net.Dialer
		return dialer.DialContext(ctx, "udp", d.conn.LocalAddr().String())
	}}
}

func (d *dnsServer) serve() {
	buf := make([]byte, 512)
	for {
		n, from, err := d.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if resp := d.respond(buf[:n]); resp != nil {
			d.conn.WriteTo(resp, from)
		}
	}
}

// respond builds the answer to one query: its question, and an A record
// of each address for an A question. Nil for what is not a query.
func (d *dnsServer) respond(q []byte) []byte {
	const header = 12
	end := header
	for end < len(q) && q[end] != 0 { // the question's name, label by label
		end += int(q[end]) + 1
	}
	if end+5 > len(q) {
		return nil
	}
	question := q[header : end+5] // name, its closing 0, type and class
	qtype := binary.BigEndian.Uint16(q[end+1:])
	var answers [][]byte
	if qtype == 1 { // A
		d.mu.Lock()
		for _, a := range d.addrs {
			ip := a.As4()
			// A pointer to the question's name, type A, class IN, TTL 0,
			// and the address.
			answers = append(answers, append([]byte{0xc0, header, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4}, ip[:]...))
		}
		d.mu.Unlock()
	}
	resp := make([]byte, header, header+len(question)+16*len(answers))
	copy(resp, q[:2])                            // the query's id
	binary.BigEndian.PutUint16(resp[2:], 0x8580) // a response, authoritative, recursion desired and available
	binary.BigEndian.PutUint16(resp[4:], 1)      // one question
	binary.BigEndian.PutUint16(resp[6:], uint16(len(answers)))
	resp = append(resp, question...)
	for _, a := range answers {
		resp = append(resp, a...)
	}
	return resp
}
