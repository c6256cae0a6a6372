package cluster

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/internal/tlsfiles"
	"github.com/nats-io/nats.go"
)

// connect connects to NATS, failing if it cannot now, and reconnecting
// for ever once it has. Every client NATS lets in is trusted as a node
// (RATIONALE.md, "Cluster mode"): the credentials and TLS are the
// cluster's only gate.
func (c *Cluster) connect() (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("aip-server " + c.cfg.NodeID),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if !nc.IsClosed() {
				c.log.Error("NATS connection lost: cross-node work is refused until it is back", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.log.Info("NATS connection back", "nats", redactNATS(nc.ConnectedUrl()))
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
		return nil, fmt.Errorf("cluster: NATS %s: %w", redactNATS(c.cfg.NATS), err)
	}
	return nc, nil
}

// redactNATS is urls, NATS URLs separated by commas, fit for a log line or
// an error: each without its password, or its token (the user part of a
// URL without a password), and without its query.
func redactNATS(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		switch {
		case err != nil:
			parts[i] = "(a NATS URL that does not parse)"
			continue
		case u.User == nil:
		case hasPassword(u.User):
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		default:
			u.User = url.User("xxxxx")
		}
		u.RawQuery, u.Fragment = "", ""
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

func hasPassword(u *url.Userinfo) bool {
	_, ok := u.Password()
	return ok
}
