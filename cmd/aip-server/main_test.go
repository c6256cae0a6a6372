package main

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/internal/logging"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// net/http logs a handler's panic itself, through the server's ErrorLog:
// under --log-format json that must be a JSON line too.
func TestNetHTTPErrorsAreJSONLinesUnderJSONLogging(t *testing.T) {
	var out testenv.LogBuffer
	log := logging.Options{Format: logging.FormatJSON, Level: slog.LevelInfo}.New(&out)
	hs := newHTTPServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }), log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })

	_, err = http.Get("http://" + ln.Addr().String() + "/")
	require.Error(t, err, "the panicking handler's connection is dropped, after the panic is logged")
	var line map[string]any
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 1, "%s", out.String())
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &line), "not a JSON line: %s", lines[0])
	assert.Equal(t, "ERROR", line["level"])
	assert.Contains(t, line["msg"], "http: panic serving")
	assert.Contains(t, line["msg"], "boom")
}

func TestTrustedProxiesAreCIDRsOrAddresses(t *testing.T) {
	for in, want := range map[string]string{"10.0.0.0/8": "10.0.0.0/8", "10.1.2.3/8": "10.0.0.0/8", "192.0.2.1": "192.0.2.1/32", "::1": "::1/128"} {
		p, err := parsePrefix(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, p.String(), in)
	}
	_, err := parsePrefix("lobby")
	assert.EqualError(t, err, `"lobby": want a CIDR such as 10.0.0.0/8, or an address`)
}

// A port that is taken fails the start before anything is written: no
// data dir, no operator token, no database to puzzle over.
func TestABusyPortFailsFastAndLeavesTheDataDirUntouched(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	quiet := slog.New(slog.DiscardHandler)

	missing := filepath.Join(t.TempDir(), "data")
	err = run(busy.Addr().String(), missing, server.Config{Logger: quiet})
	require.Error(t, err)
	assert.Contains(t, err.Error(), busy.Addr().String())
	assert.NoDirExists(t, missing)

	empty := t.TempDir()
	require.Error(t, run(busy.Addr().String(), empty, server.Config{Logger: quiet}))
	entries, err := os.ReadDir(empty)
	require.NoError(t, err)
	assert.Empty(t, entries)
}
