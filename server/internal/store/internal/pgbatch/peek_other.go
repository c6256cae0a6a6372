//go:build !unix

package pgbatch

import "net"

// Unasked is false where the socket cannot be looked at without reading
// it: the pipeline then goes out with its BEGIN.
func Unasked(net.Conn) bool { return false }
