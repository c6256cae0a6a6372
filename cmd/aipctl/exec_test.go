package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildParamsMergesJSONAndKeyValues(t *testing.T) {
	p, _, err := buildParams(`{"path":"/a","n":1}`, []string{"path=/b", "count=3", "flag=true", "name=kiosk 1", `quoted="5"`, "list=[1,2]"}, nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"path": "/b", "n": float64(1), "count": float64(3), "flag": true, "name": "kiosk 1", "quoted": "5", "list": []any{float64(1), float64(2)},
	}, p)

	for _, bad := range []string{`[1]`, `null`, ` null `, `"s"`, `3`} {
		_, _, err = buildParams(bad, []string{"path=/x"}, nil)
		assert.ErrorContains(t, err, "--params: not a JSON object", "--params %s", bad)
	}
	_, _, code := ctl(t, "exec", "k1", "hash_file", "--params", "null", "path=/x")
	assert.Equal(t, exitUsage, code, "refused before asking any server")
	_, _, err = buildParams("", []string{"novalue"}, nil)
	assert.ErrorContains(t, err, `parameter "novalue": want KEY=VALUE`)
}

func TestAPIFailuresMapToExitCodes(t *testing.T) {
	code := func(err error) int {
		var ee *exitError
		require.True(t, errors.As(apiFailure(err), &ee))
		return ee.code
	}
	assert.Equal(t, exitUnreachable, code(api.ErrUnreachable))
	assert.Equal(t, exitUnreachable, code(&api.StatusError{Code: http.StatusUnauthorized}))
	assert.Equal(t, exitUsage, code(&api.StatusError{Code: http.StatusNotFound}))
	assert.Equal(t, exitFailed, code(&api.StatusError{Code: http.StatusServiceUnavailable}))
}

// A server that accepts the connection and never replies must not hang
// aipctl: exec gives up once the command's timeout and --reply-timeout
// have passed.
func TestExecGivesUpOnAServerThatNeverReplies(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		var held []net.Conn // open, unread, unanswered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	t.Setenv("AIP_TOKEN", "aipo_test")

	// exec first reads the tool's schema: nothing is sent yet.
	start := time.Now()
	_, errOut, code := ctl(t, "--server", "http://"+l.Addr().String(), "--reply-timeout", "500ms", "exec", "kiosk-1", "echo", "--timeout", "1s")
	assert.Equal(t, exitUnreachable, code, errOut)
	assert.Equal(t, "server unreachable: GET /api/devices/kiosk-1/tools: no reply within 500ms", errOut)
	assert.Less(t, time.Since(start), 5*time.Second, "the bound is 500ms")

	// A server that lists the tools, then never answers the command.
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Write([]byte("[]"))
			return
		}
		// Read to the end: only then does the server see the client go.
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	defer silent.Close()
	start = time.Now()
	_, errOut, code = ctl(t, "--server", silent.URL, "--reply-timeout", "500ms", "--preparation-wait", "500ms", "exec", "kiosk-1", "echo", "--timeout", "1s")
	took := time.Since(start)
	assert.Equal(t, exitUnreachable, code, errOut)
	assert.Contains(t, errOut, "server unreachable: POST /api/devices/kiosk-1/commands: no reply within 2s")
	assert.Regexp(t, `it may have run: repeat the call with --idempotency-key \S+ to get its outcome without running it twice`, errOut)
	assert.Less(t, took, 5*time.Second, "the bound is 2s: the timeout, the preparation it may add, and the reply")
}

func TestTimeoutsPastAPlanStepsCapAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"exec", "kiosk-1", "echo", "--timeout", "25h"},
		{"exec", "kiosk-1", "echo", "--timeout", "0s"},
		{"tool", "deploy", "kiosk-1", fixturePath("echo.wasm"), "--timeout", "25h"},
	} {
		_, errOut, code := ctl(t, args...)
		assert.Equal(t, exitUsage, code, "%v", args)
		assert.Contains(t, errOut, "--timeout: ", "%v", args)
		assert.Contains(t, errOut, " is outside (0, 24h0m0s]", "%v: refused before asking any server", args)
	}
}

// A call that starts a task goes with an Idempotency-Key: one given with
// --idempotency-key makes its repeat answer as the first, running nothing
// again.
func TestARepeatedCallWithItsIdempotencyKeyRunsOnce(t *testing.T) {
	f := newFleet(t, map[string]map[string]string{"kiosk-1": lobby})
	run := func(args ...string) map[string]any {
		out, errOut, code := f.ctl(append(args, "-o", "json", "--idempotency-key", "k-"+args[0])...)
		require.Equal(t, exitOK, code, errOut)
		var resp map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &resp), out)
		return resp
	}
	first := run("exec", "kiosk-1", "echo", "message=once")
	again := run("exec", "kiosk-1", "echo", "message=once")
	assert.Equal(t, first, again, "the first answer, repeated")

	plan := f.plan("steps: [{tool: echo}]")
	first = run("dispatch", "kiosk-1", plan)
	again = run("dispatch", "kiosk-1", plan)
	assert.Equal(t, first["session_id"], again["session_id"], "the same task")

	tasks, err := f.api.Tasks(context.Background(), "", 0)
	require.NoError(t, err)
	assert.Len(t, tasks, 2, "one command, one plan")

	_, errOut, code := f.ctl("exec", "kiosk-1", "echo", "message=another", "--idempotency-key", "k-exec")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `Idempotency-Key "k-exec" was used for another request`)
}
