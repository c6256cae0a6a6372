package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/logging"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/server"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonLog collects JSON log lines from many goroutines.
type jsonLog struct{ testenv.LogBuffer }

func (l *jsonLog) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), "not a JSON line: %s", sc.Text())
		out = append(out, line)
	}
	return out
}

// commandKeys are the keys that mark a line as one about a command or
// its results: any id of either.
var commandKeys = []string{"response_id", "call_id", "request_id", "action_call_id"}

// commandWords mark a line as one about a command, its results or a
// deploy by its message, so that a line that names none of commandKeys
// does not escape the check. "commands" and a session's "result" are
// about more than one command: no single command's ids fit them.
var commandWords = regexp.MustCompile(`(?i)\b(command|results|deploy\w*)\b`)

// aboutCommand reports whether line is about a command or its results.
func aboutCommand(line map[string]any) bool {
	msg, _ := line["msg"].(string)
	return commandWords.MatchString(msg) || slices.ContainsFunc(commandKeys, func(k string) bool { _, ok := line[k]; return ok })
}

// requireCommandFields checks that every line about a command or its
// results names its device, session, response and calls, and that the
// lines in want are among them.
func requireCommandFields(t *testing.T, who string, lines []map[string]any, want ...string) {
	t.Helper()
	seen := map[string]bool{}
	for _, line := range lines {
		if !aboutCommand(line) {
			continue
		}
		seen[line["msg"].(string)] = true
		for _, k := range []string{"device", "session_id", "response_id", "call_id"} {
			v, _ := line[k].(string)
			assert.NotEmpty(t, v, "%s: %q lacks %s: %v", who, line["msg"], k, line)
		}
	}
	for _, msg := range want {
		assert.True(t, seen[msg], "%s never logged %q with the command's ids", who, msg)
	}
}

func TestEveryCommandLogLineNamesDeviceSessionResponseAndCalls(t *testing.T) {
	jsonOut := logging.Options{Format: logging.FormatJSON, Level: slog.LevelDebug}
	serverLog, agentLog := &jsonLog{}, &jsonLog{}
	data := t.TempDir()
	srv, err := server.New(context.Background(), server.Config{DataDir: data, Logger: jsonOut.New(serverLog)})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { srv.Shutdown(); hs.Close(); srv.Close() })
	token, err := os.ReadFile(filepath.Join(data, server.AdminTokenFile))
	require.NoError(t, err)
	c := &cluster{t: t, srv: srv, http: hs, data: data, api: &api.Client{BaseURL: hs.URL, Token: strings.TrimSpace(string(token))}}
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), func(cfg *agent.Config) { cfg.Logger = jsonOut.New(agentLog) })

	resp := c.exec("kiosk-1", "echo", map[string]any{"a": 1}, 10*time.Second)
	require.Equal(t, "success", resp.Status)
	resp = c.exec("kiosk-1", "fail", nil, 10*time.Second)
	require.Equal(t, "failure", resp.Status)
	require.Equal(t, "failure", c.deploy("kiosk-1", "unsigned_echo").Status)

	requireCommandFields(t, "aip-server", serverLog.lines(t), "command sent", "results recorded", "command done", "tool deploy failed")
	// "results acknowledged" names the request_id of the results, which
	// the server's ack carries.
	requireCommandFields(t, "aip-agent", agentLog.lines(t), "command received", "action done", "results acknowledged")
	assert.Equal(t, "cbor", field(t, serverLog.lines(t), "device registered", "wire"), "the wire by its name")
	assert.Equal(t, "cbor", field(t, agentLog.lines(t), "registered", "wire"), "the wire by its name")
}

// field returns key of the first line whose message is msg.
func field(t *testing.T, lines []map[string]any, msg, key string) any {
	t.Helper()
	for _, line := range lines {
		if line["msg"] == msg {
			return line[key]
		}
	}
	t.Fatalf("no line %q", msg)
	return nil
}
