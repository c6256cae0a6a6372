package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/edgeaip/edgeaip/internal/logging"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is written by the HTTP server's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// net/http logs a handler's panic itself, through the server's ErrorLog:
// under --log-format json that must be a JSON line too.
func TestNetHTTPErrorsAreJSONLinesUnderJSONLogging(t *testing.T) {
	var out lockedBuffer
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
