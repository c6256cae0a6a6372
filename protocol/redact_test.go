package protocol

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRedactURLHidesQueryValuesAndPasswords(t *testing.T) {
	for in, want := range map[string]string{
		"ws://h:8700/ws":                           "ws://h:8700/ws",
		"ws://h:8700/ws?token=aipd_secret":         "ws://h:8700/ws?token=REDACTED",
		"wss://h/ws?token=a%2Fb&x=1":               "wss://h/ws?token=REDACTED&x=REDACTED",
		"ws://user:pass@h/ws":                      "ws://user:xxxxx@h/ws",
		"ws://h/ws?token=aipd_secret#frag":         "ws://h/ws?token=REDACTED#frag",
		"ws://h:bad port/ws?token=aipd_secret":     "ws://h:bad port/ws?REDACTED",
		"ws://h:bad port/ws":                       "ws://h:bad port/ws",
		"ws://h/ws?token=aipd_secret&token=second": "ws://h/ws?token=REDACTED",
		"not a url":                    "not a url",
		"ws://h/a b?token=aipd_secret": "ws://h/a b?token=REDACTED",
		// A password that does not parse is hidden with its user.
		"nats://u:p w@h:4222":            "nats://xxxxx@h:4222",
		"nats://u:sec%zz@h:4222":         "nats://xxxxx@h:4222",
		"ws://u:pa/ss@h/ws?token=secret": "ws://xxxxx@h/ws?REDACTED",
	} {
		assert.Equal(t, want, RedactURL(in), in)
	}
}

// net/http's errors quote the URL they failed on; Dial's must not show
// the token UFO's clients put in it.
func TestDialErrorsDoNotShowTheURLsToken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	_, _, err = Dial(context.Background(), "ws://"+addr+"/ws?token=aipd_secret_token", DialOptions{Encoding: JSON})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "aipd_secret_token")
	assert.Contains(t, err.Error(), "ws://"+addr+"/ws?token=REDACTED")
	var opErr *net.OpError
	assert.True(t, errors.As(err, &opErr), "the cause is still there to inspect: %v", err)
}
