//go:build unix

package pgbatch

import (
	"net"
	"syscall"
)

// Unasked reports whether the server has closed c, or sent on it what
// nobody asked for (the error it sends before it closes a connection:
// shutting down, terminated), by a look at the socket that neither waits
// nor takes what it sees; over TLS, the socket beneath. A connection
// that cannot be looked at reports false.
func Unasked(c net.Conn) bool {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		// TLS: the socket beneath, looked at without reading, shows a
		// close, or bytes waiting, as well as a plain one does.
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var (
		perr error
		buf  [1]byte
	)
	// Control, not Read: pgconn may have left a reader of its own blocked
	// in a read of this socket (it reads while it writes a large batch,
	// lest both ends block writing), holding the read lock that Read
	// would wait for. A look from beside it takes no lock; what that
	// reader has taken already, pgconn reads at the batch.
	if err := raw.Control(func(fd uintptr) {
		_, _, perr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return true
	}
	// Nothing to read (EAGAIN) is a connection alive as far as can be
	// seen; a byte, or none without an error (its end), is not.
	return perr == nil || (perr != syscall.EAGAIN && perr != syscall.EWOULDBLOCK)
}
