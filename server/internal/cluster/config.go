package cluster

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/edgeaip/edgeaip/protocol"
)

// CheckNodeID refuses what cannot be a node's id: it is a NATS subject
// token, so no '.', '*', '>' or space, and a row's key.
func CheckNodeID(id string) error {
	if !validNodeID.MatchString(id) {
		return fmt.Errorf("node id %.80q: want 1-63 of [A-Za-z0-9_-]", id)
	}
	return nil
}

// natsSchemes are the schemes nats.go dials.
var natsSchemes = map[string]bool{"nats": true, "tls": true, "ws": true, "wss": true}

// CheckNATS refuses a NATS URL list (comma-separated) that nats.go could
// never connect with, naming the URL, its password or token hidden. As
// nats.go does, it skips empty entries and takes HOST:PORT as nats://.
func CheckNATS(urls string) error {
	n := 0
	for _, s := range strings.Split(urls, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n++
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		u, err := url.Parse(s)
		switch {
		case err != nil:
			// url's error quotes the URL: not shown.
			return fmt.Errorf("NATS URL %q: does not parse as a URL", RedactNATS(s))
		case !natsSchemes[u.Scheme]:
			return fmt.Errorf("NATS URL %q: want nats://HOST:PORT (or tls://, ws://, wss://)", RedactNATS(s))
		case u.Hostname() == "":
			return fmt.Errorf("NATS URL %q: no host", RedactNATS(s))
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("NATS URL %q: port %s: want 1-65535", RedactNATS(s), p)
			}
		}
	}
	if n == 0 {
		return fmt.Errorf("NATS URL list %q: no URL in it", urls)
	}
	return nil
}

// RedactNATS is a NATS URL list fit for logs and errors: each URL's
// password hidden, and its user too when it has no password, since
// nats://TOKEN@HOST carries a token there.
func RedactNATS(urls string) string {
	parts := strings.Split(urls, ",")
	for i, s := range parts {
		s = strings.TrimSpace(s)
		if u, err := url.Parse(s); err == nil && u.User != nil {
			if _, ok := u.User.Password(); !ok {
				s = strings.Replace(s, u.User.String()+"@", "xxxxx@", 1)
			}
		}
		parts[i] = protocol.RedactURL(s)
	}
	return strings.Join(parts, ",")
}

// CheckAddress refuses an address GET /api/cluster could not show as
// where the node serves: HOST:PORT, or an http:// or https:// URL.
func CheckAddress(addr string) error {
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		if u, err := url.Parse(addr); err != nil || u.Host == "" {
			return fmt.Errorf("address %.120q: want HOST:PORT, or an http(s):// URL with a host", addr)
		}
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || strings.ContainsAny(host, " /\\@?#") {
		return fmt.Errorf("address %.120q: want HOST:PORT, or an http(s):// URL with a host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("address %.120q: port %q: want 1-65535", addr, port)
	}
	return nil
}
