package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/internal/tlsfiles"
	"github.com/nats-io/nats.go"
)

// connect connects to NATS, failing if it cannot now, and reconnecting
// for ever once it has; a connection that stops answering pings is
// dropped and connected again (Config.PingInterval). Every client NATS
// lets in is trusted as a node (RATIONALE.md): the credentials and TLS
// are the cluster's only gate.
func (c *Cluster) connect() (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("aip-server " + c.cfg.NodeID),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.PingInterval(c.cfg.PingInterval),
		nats.MaxPingsOutstanding(c.cfg.MaxPingsOut),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() {
				return
			}
			if errors.Is(err, nats.ErrStaleConnection) {
				err = fmt.Errorf("%w: %d pings %s apart unanswered", err, c.cfg.MaxPingsOut, c.cfg.PingInterval)
			}
			c.mu.Lock()
			c.natsLost = err
			handlers := c.onNATS
			c.mu.Unlock()
			c.log.Error("NATS connection lost: cross-node work is refused until it is back", "err", err)
			for _, fn := range handlers {
				fn(err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.log.Info("NATS connection back", "nats", RedactNATS(nc.ConnectedUrl()))
			c.mu.Lock()
			handlers := c.onNATS
			c.mu.Unlock()
			for _, fn := range handlers {
				fn(nil)
			}
		}),
	}
	if c.cfg.NATSCA != "" {
		pool, err := tlsfiles.CertPool(c.cfg.NATSCA)
		if err != nil {
			return nil, fmt.Errorf("cluster: NATS CA: %w", err)
		}
		opts = append(opts, nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	nc, err := nats.Connect(c.cfg.NATS, opts...)
	if err != nil {
		return nil, fmt.Errorf("cluster: NATS %s: %w", RedactNATS(c.cfg.NATS), err)
	}
	return nc, nil
}

// OnNATS calls fn, on NATS's goroutine for such events, each time the
// NATS connection is lost (with why) and each time it is back (nil).
func (c *Cluster) OnNATS(fn func(lost error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onNATS = append(c.onNATS, fn)
}
