// Package logtest keeps what the agent's parts log, for tests to check
// what they say, and that every line about a command names the ids an
// operator greps for.
package logtest

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Quiet is a logger that keeps nothing.
var Quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Recorder keeps what is logged to its Logger, debug lines included.
type Recorder struct{ testenv.LogBuffer }

// Logger logs to r, as text.
func (r *Recorder) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(r, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Contains reports whether s was logged.
func (r *Recorder) Contains(s string) bool { return strings.Contains(r.String(), s) }

// RequireIDs checks that each line logged with msg names the ids an
// operator greps for, with the values in ids, and that there is one.
func (r *Recorder) RequireIDs(t *testing.T, msg string, ids map[string]string) {
	t.Helper()
	found := false
	for line := range strings.Lines(r.String()) {
		if !strings.Contains(line, fmt.Sprintf("msg=%q", msg)) {
			continue
		}
		found = true
		for k, v := range ids {
			assert.Contains(t, line, " "+k+"="+v+" ", "%q names %s", msg, k)
		}
	}
	require.True(t, found, "never logged %q", msg)
}
