package server

import (
	"context"
	"fmt"
	"net"
	"time"
)

// Listen opens the server's TCP listener on addr. Its connections send
// TCP keepalives only after three minutes idle, not after Go's 15 s: a
// device's link is never idle that long, since it carries a ping at
// least every minute, and probes every 15 s would double what an idle
// link costs on the wire; an idle HTTP connection whose client is gone
// is still found out.
func Listen(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 3 * time.Minute, Interval: 30 * time.Second, Count: 4}}
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}
