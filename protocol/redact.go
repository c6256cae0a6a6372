package protocol

import (
	"net/url"
	"strings"
)

// redacted stands in for a secret in logs and errors.
const redacted = "REDACTED"

// RedactURL is rawURL fit for a log line or an error: the value of every
// query parameter, where UFO's clients carry their token (?token=), and
// any password, replaced by REDACTED and xxxxx; the rest as it was
// written. What cannot be parsed is cut at its query, and its user info
// hidden whole.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		out := rawURL
		if i := strings.IndexAny(out, "?#"); i >= 0 {
			out = out[:i] + "?" + redacted
		}
		if info := unparsedUserinfo(out); info != "" {
			out = strings.Replace(out, info+"@", "xxxxx@", 1)
		}
		return out
	}
	out := rawURL
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{redacted}
		}
		out = strings.Replace(out, "?"+u.RawQuery, "?"+q.Encode(), 1)
	}
	if _, ok := u.User.Password(); ok {
		out = strings.Replace(out, u.User.String()+"@", u.User.Username()+":xxxxx@", 1)
	}
	return out
}

// unparsedUserinfo is the user info of rawURL, a URL that does not parse,
// where one would be: between "://" and the last '@' before any query.
// It is hidden whole, since where its password starts is not known.
func unparsedUserinfo(rawURL string) string {
	_, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest = rest[:i]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	return rest[:at]
}

// minSecret is the shortest query value hidden on its own; the query as a
// whole always is.
const minSecret = 8

// urlSecrets are the strings of rawURL that RedactURL hides, as they may
// appear in an error that quotes the URL: its query, whole and value by
// value, raw and unescaped, and its password.
func urlSecrets(rawURL string) []string {
	u, err := url.Parse(rawURL)
	if err != nil {
		var out []string
		if i := strings.IndexAny(rawURL, "?#"); i >= 0 {
			out = append(out, rawURL[i:])
		}
		if info := unparsedUserinfo(rawURL); info != "" {
			out = append(out, info)
		}
		return out
	}
	var out []string
	if u.RawQuery != "" {
		out = append(out, u.RawQuery)
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			// A short value cannot be told from the words around it.
			if len(v) >= minSecret {
				out = append(out, url.QueryEscape(v), v)
			}
		}
	}
	if p, ok := u.User.Password(); ok {
		out = append(out, p)
	}
	return out
}

// redactedError is an error whose text may quote a URL (net/http's
// url.Error does), with that URL's secrets hidden.
type redactedError struct {
	err     error
	secrets []string
}

// redactErr hides the secrets of rawURL in err's text.
func redactErr(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	return &redactedError{err: err, secrets: urlSecrets(rawURL)}
}

func (e *redactedError) Error() string {
	s := e.err.Error()
	for _, secret := range e.secrets {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, redacted)
		}
	}
	return s
}

func (e *redactedError) Unwrap() error { return e.err }
