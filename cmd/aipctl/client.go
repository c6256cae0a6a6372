package main

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/internal/tlsfiles"
	"github.com/edgeaip/edgeaip/server/api"
)

// globals are the flags every subcommand shares.
type globals struct {
	server       string
	tokenFile    string
	ca           string
	output       string
	replyTimeout time.Duration
	// preparationWait: api.Client.PreparationWait.
	preparationWait time.Duration
	// serverSilence: api.Client.ServerSilence.
	serverSilence time.Duration
}

// json reports whether the output is JSON, for scripts.
func (g *globals) json() bool { return g.output == "json" }

// errNoToken is client's error when no operator token is given.
var errNoToken = errors.New("no operator token: set AIP_TOKEN or pass --token-file (the server writes it to DATA/admin.token)")

// client builds an API client from flags and environment.
func (g *globals) client() (*api.Client, error) {
	base, err := g.serverURL()
	if err != nil {
		return nil, err
	}
	c := &api.Client{BaseURL: base, ReplyTimeout: g.replyTimeout, PreparationWait: g.preparationWait, ServerSilence: g.serverSilence}
	switch {
	case g.tokenFile != "":
		b, err := os.ReadFile(g.tokenFile)
		if err != nil {
			return nil, &exitError{exitUsage, fmt.Errorf("--token-file: %w", err)}
		}
		c.Token = strings.TrimSpace(string(b))
	default:
		c.Token = os.Getenv("AIP_TOKEN")
	}
	if c.Token == "" {
		return nil, &exitError{exitUsage, errNoToken}
	}
	if ca := cmp.Or(g.ca, os.Getenv("AIP_CA")); ca != "" {
		pool, err := tlsfiles.CertPool(ca)
		if err != nil {
			return nil, &exitError{exitUsage, fmt.Errorf("--ca: %w", err)}
		}
		c.HTTP = api.HTTPClient(&tls.Config{RootCAs: pool})
	}
	return c, nil
}

// defaultServer is the server aipctl calls when neither --server nor
// AIP_SERVER names one.
const defaultServer = "http://127.0.0.1:8700"

// serverURL is the server's URL, from --server, else AIP_SERVER, else
// defaultServer. It must be http:// or https:// with a host: a bare
// HOST:PORT is refused, as the agent refuses one for its ws:// URL,
// rather than guessed at, since the guess (http or https) decides
// whether the token crosses the network in the clear.
func (g *globals) serverURL() (string, error) {
	s, from := g.server, "--server"
	if s == "" {
		s, from = os.Getenv("AIP_SERVER"), "AIP_SERVER"
	}
	if s == "" {
		return defaultServer, nil
	}
	u, err := url.Parse(s)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return s, nil
	}
	msg := fmt.Sprintf("%s %q: want http://HOST:PORT or https://HOST:PORT", from, s)
	if !strings.Contains(s, "://") {
		msg += fmt.Sprintf("; did you mean http://%s?", s)
	}
	return "", &exitError{exitUsage, errors.New(msg)}
}

// idempotencyKey is the Idempotency-Key of a call that starts a task: the
// one given with --idempotency-key, or a fresh one.
func idempotencyKey(given string) string { return cmp.Or(given, api.NewIdempotencyKey()) }

// startFailure is apiFailure for a call that started a task with key:
// when no answer came, the task may have started, and the error says how
// to repeat the call without starting it twice.
func startFailure(err error, key string) error {
	switch {
	case errors.Is(err, api.ErrServerSilent):
		err = fmt.Errorf("%w\nits outcome is unknown: it may have run, or may still be running. Once the server answers again, "+
			"repeat the call with --idempotency-key %s to get its outcome without running it twice, or find its task with aipctl tasks", err, key)
	case errors.Is(err, api.ErrUnreachable):
		err = fmt.Errorf("%w\nit may have run: repeat the call with --idempotency-key %s to get its outcome without running it twice", err, key)
	}
	return apiFailure(err)
}

// keyFlagUsage describes --idempotency-key.
const keyFlagUsage = "send the call with this Idempotency-Key (default: a fresh one, shown when no answer comes): " +
	"the server runs a repeat within 24 h only once, and answers it as the first"

// apiFailure maps an API error to aipctl's exit codes, as the README's
// table gives them.
func apiFailure(err error) error {
	var se *api.StatusError
	var untrusted x509.UnknownAuthorityError
	switch {
	case errors.As(err, &untrusted):
		return &exitError{exitUnreachable, fmt.Errorf("%w\nthe server's certificate is not trusted: give the CA that signed it with --ca or AIP_CA", err)}
	case errors.Is(err, api.ErrUnreachable):
		return &exitError{exitUnreachable, err}
	case errors.As(err, &se) && (se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden || se.Code == http.StatusTooManyRequests):
		// 429: the source failed to authenticate too often.
		return &exitError{exitUnreachable, err}
	case errors.As(err, &se) && se.Code/100 == 4:
		return &exitError{exitUsage, err}
	}
	return &exitError{exitFailed, err}
}
