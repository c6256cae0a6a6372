//go:build unix

package pgbatch

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// connPair is both ends of a loopback TCP connection.
func connPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	server = <-accepted
	require.NotNil(t, server)
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// The look at the writer's socket before a batch sees a connection the
// server closed, or sent on unasked, and nothing on one at rest, and
// takes nothing from it.
func TestALookAtTheSocketSeesAServerThatClosedOrSpokeUnasked(t *testing.T) {
	client, server := connPair(t)
	assert.False(t, Unasked(client), "at rest")
	_, err := server.Write([]byte("E"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return Unasked(client) }, 10*time.Second, time.Millisecond, "unasked")
	buf := make([]byte, 1)
	_, err = client.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "E", string(buf), "the look took nothing")

	server.Close()
	require.Eventually(t, func() bool { return Unasked(client) }, 10*time.Second, time.Millisecond, "closed")
}

// pgconn may leave a reader of its own blocked in a read of the socket
// after a large batch: the look does not wait for it (it did, and the
// writer hung until the server next spoke).
func TestALookAtTheSocketDoesNotWaitForAReaderBlockedInIt(t *testing.T) {
	client, server := connPair(t)
	read := make(chan struct{})
	go func() {
		buf := make([]byte, 1)
		client.Read(buf)
		close(read)
	}()
	runtime.Gosched()
	looked := make(chan bool, 1)
	go func() { looked <- Unasked(client) }()
	select {
	case <-looked:
	case <-time.After(10 * time.Second):
		server.Write([]byte("Z")) // lets the reader, and the look, go
		t.Fatal("the look waited for the reader blocked in the socket")
	}
	server.Write([]byte("Z"))
	<-read
}
