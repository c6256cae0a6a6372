package link

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/internal/version"
	"github.com/edgeaip/edgeaip/protocol"
)

// dial connects to the server at t with the device's credentials: its
// token, if it has one, and over TLS its certificate, if it has one.
func (l *Link) dial(ctx context.Context, t target) (*protocol.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	opts := l.opts.Conn
	opts.Reject, opts.Logger = protocol.ClientErrorReply(l.opts.DeviceID), l.log
	token := l.opts.Tokens.Token()
	dest, err := dialURL(t.url, token, l.opts.Wire)
	if err != nil {
		return nil, err
	}
	client := httpClient(l.tls, t)
	if client != nil {
		defer client.CloseIdleConnections()
	}
	header := http.Header{"User-Agent": {userAgent()}}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	conn, resp, err := protocol.Dial(dctx, dest, protocol.DialOptions{
		Header:      header,
		Encoding:    l.opts.Wire,
		HTTPClient:  client,
		ConnOptions: opts,
	})
	if resp != nil && resp.StatusCode == http.StatusUnauthorized {
		return nil, refusedCredentials(resp)
	}
	if resp != nil && resp.StatusCode == http.StatusUpgradeRequired {
		return nil, fmt.Errorf("server refused this agent's version of the wire (426): %s", refusal(resp, "no reason given"))
	}
	if err != nil {
		return nil, l.explainTLS(err, t)
	}
	return conn, nil
}

// httpClient is the client that dials t, over TLS tc: at t's address,
// if it has one, while the request, its Host header and the TLS server
// name keep the URL's host name. Nil, the default, when there is neither.
func httpClient(tc *tls.Config, t target) *http.Client {
	if tc == nil && t.addr == "" {
		return nil
	}
	tr := protocol.LinkTransport()
	tr.TLSClientConfig = tc
	if t.addr != "" {
		named, dial := hostPort(t.url), tr.DialContext
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == named { // not a proxy's address, which is dialled as it is
				addr = t.addr
			}
			return dial(ctx, network, addr)
		}
	}
	return &http.Client{Transport: tr}
}

// hostPort is the host and port a URL's connection goes to, as the HTTP
// transport dials it: with the scheme's port when the URL names none.
func hostPort(serverURL string) string {
	u, err := url.Parse(serverURL)
	if err != nil {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"ws": "80", "wss": "443"}[u.Scheme]
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// dialURL is the URL the link dials. On the JSON wire, which is for UFO's
// server, the token goes in the URL too, as ?token=: UFO's server reads
// only that. The Authorization header carries it either way, for ours.
// The URL is never logged as it is (protocol.RedactURL).
func dialURL(serverURL, token string, wire protocol.Encoding) (string, error) {
	if wire != protocol.JSON || token == "" {
		return serverURL, nil
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("server URL %s: %w", protocol.RedactURL(serverURL), err)
	}
	q := u.Query()
	q.Set("token", token)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// userAgent is the agent's User-Agent on its link: its name and version,
// which the server quotes back when it refuses the agent's wire.
func userAgent() string { return "aip-agent/" + version.Version() }

// refusedCredentials is the error of a 401 at the upgrade, with the
// reason the server gave: none for a wrong token; for a revoked token or
// certificate, that it was revoked and when, and the device must then be
// enrolled again; for another certificate refused, why.
func refusedCredentials(resp *http.Response) error {
	reason := refusal(resp, "unauthorized")
	if revokedAt.MatchString(reason) {
		return fmt.Errorf("server refused the device (401 %s): this device was revoked; it links again only once enrolled again "+
			"(aipctl device enroll) and given the new token or certificate", reason)
	}
	return fmt.Errorf("server refused the device (401 %s): check --id, the token file and the device certificate", reason)
}

// revokedAt finds, in a server's reason, that the device's token or
// certificate was revoked, and when.
var revokedAt = regexp.MustCompile(`\brevoked (?:with the device )?at \S`)

// refusal is the reason the body of a refused upgrade gives, or def.
func refusal(resp *http.Response, def string) string {
	if resp.Body != nil {
		if b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024)); len(strings.TrimSpace(string(b))) > 0 {
			return strings.TrimSpace(string(b))
		}
	}
	return def
}

// explainTLS says what a TLS failure of a dial means for the operator: a
// server certificate the device does not trust, or one not valid for the
// URL; or a device certificate the server refused (an alert from the
// server, whose cause it logs: the device can tell only whether its
// certificate expired).
func (l *Link) explainTLS(err error, t target) error {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	switch {
	case errors.As(err, &unknown):
		return fmt.Errorf("the server's certificate is not trusted (give the CA that signed it as --ca, server.ca): %w", err)
	case errors.As(err, &invalid), errors.As(err, &hostname):
		return fmt.Errorf("the server's certificate is not valid for %s: %w", protocol.RedactURL(t.url), err)
	case isAlert(err) && l.tls != nil && l.tls.GetClientCertificate != nil:
		return fmt.Errorf("the server refused the device certificate%s (its log says why): %w", l.certProblem(), err)
	}
	return err
}

// isAlert reports whether err is a TLS alert the server sent.
func isAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// certProblem is what the device can see wrong with its own certificate:
// ", which expired at T", or nothing.
func (l *Link) certProblem() string {
	cert, err := l.tls.GetClientCertificate(&tls.CertificateRequestInfo{})
	if err != nil || cert.Leaf == nil {
		return ""
	}
	if now := time.Now(); now.After(cert.Leaf.NotAfter) {
		return fmt.Sprintf(", which expired at %s", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	} else if now.Before(cert.Leaf.NotBefore) {
		return fmt.Sprintf(", which is valid only from %s", cert.Leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	return ", though it has not expired: is it signed by a CA the server trusts (its --client-ca or --device-ca-cert)?"
}
