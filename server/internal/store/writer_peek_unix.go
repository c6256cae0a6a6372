//go:build unix

package store

import (
	"net"
	"syscall"
)

// unasked reports whether the server has closed c, or sent on it what
// nobody asked for (the error it sends before it closes a connection:
// shutting down, terminated), by a look at the socket that neither waits
// nor takes what it sees. A connection that cannot be looked at (TLS)
// reports false.
func unasked(c net.Conn) bool {
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
	if err := raw.Read(func(fd uintptr) bool {
		_, _, perr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil {
		return true
	}
	// Nothing to read (EAGAIN) is a connection alive as far as can be
	// seen; a byte, or none without an error (its end), is not.
	return perr == nil || (perr != syscall.EAGAIN && perr != syscall.EWOULDBLOCK)
}
