package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/httpapi"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyedAnswer is an answer to a request sent with an Idempotency-Key.
type keyedAnswer struct {
	code     int
	body     []byte
	replayed bool
}

// postKeyed POSTs body to path with the Idempotency-Key key (none if
// empty), as the given JSON text.
func (ts *testServer) postKeyed(path, key, body string) keyedAnswer {
	ts.t.Helper()
	req, err := http.NewRequest("POST", ts.http.URL+path, strings.NewReader(body))
	require.NoError(ts.t, err)
	req.Header.Set("Authorization", "Bearer "+ts.api.Token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(api.IdempotencyKeyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(ts.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(ts.t, err)
	return keyedAnswer{code: resp.StatusCode, body: bytes.TrimSpace(b), replayed: resp.Header.Get(httpapi.ReplayedHeader) == "true"}
}

// postKeyedAsync is postKeyed in a goroutine of its own.
func (ts *testServer) postKeyedAsync(path, key, body string) <-chan keyedAnswer {
	out := make(chan keyedAnswer, 1)
	go func() { out <- ts.postKeyed(path, key, body) }()
	return out
}

func (ts *testServer) taskCount() int {
	ts.t.Helper()
	tasks, err := ts.api.Tasks(context.Background(), "", 0)
	require.NoError(ts.t, err)
	return len(tasks)
}

const echoCommand = `{"actions": [{"tool_name": "echo"}], "timeout": "1m"}`

func TestARepeatedCommandRunsOnceAndGetsTheFirstAnswerEvenWhileItRuns(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1")
	const path = "/api/devices/kiosk-1/commands"

	first := ts.postKeyedAsync(path, "key-1", echoCommand)
	cmd := dev.nextCommand()
	// The repeat comes while the first still runs: it waits for it, and a
	// request under the same key with another body is refused at once.
	repeat := ts.postKeyedAsync(path, "key-1", echoCommand)
	ts.waitLog("a repeated request waits for the first with its Idempotency-Key")
	other := ts.postKeyed(path, "key-1", `{"actions": [{"tool_name": "spin"}], "timeout": "1m"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, other.code)
	assert.Contains(t, string(other.body), `Idempotency-Key \"key-1\" was used for another request`)

	dev.answer(cmd, protocol.ResultSuccess, "r1")
	dev.ackOf("r1")
	a, b := <-first, <-repeat
	require.Equal(t, http.StatusOK, a.code, string(a.body))
	assert.False(t, a.replayed)
	require.Equal(t, http.StatusOK, b.code, string(b.body))
	assert.True(t, b.replayed, "the repeat says it repeats the first answer")
	assert.JSONEq(t, string(a.body), string(b.body))

	later := ts.postKeyed(path, "key-1", echoCommand)
	assert.True(t, later.replayed)
	assert.JSONEq(t, string(a.body), string(later.body), "and once it has ended")
	var resp api.CommandResponse
	require.NoError(t, json.Unmarshal(a.body, &resp))
	assert.True(t, resp.Succeeded())
	assert.Equal(t, 1, ts.taskCount(), "one task")
	dev.ping() // the device was sent nothing more

	// Another key is another command.
	again := ts.postKeyedAsync(path, "key-2", echoCommand)
	dev.answer(dev.nextCommand(), protocol.ResultSuccess, "")
	assert.False(t, (<-again).replayed)
}

func TestARepeatedDispatchOrFleetStartsNothingAgain(t *testing.T) {
	ts := newTestServer(t)
	enrolled, err := ts.api.Enroll(context.Background(), api.EnrollRequest{ID: "kiosk-1", Labels: map[string]string{"site": "lobby"}})
	require.NoError(t, err)
	dev := ts.mustDial(enrolled.Token)
	dev.register("kiosk-1")
	dev.serveOK()

	dispatch := `{"client_id": "kiosk-1", "request": "steps: [{tool: echo}]"}`
	a := ts.postKeyed("/api/dispatch", "d-1", dispatch)
	require.Equal(t, http.StatusOK, a.code, string(a.body))
	b := ts.postKeyed("/api/dispatch", "d-1", dispatch)
	require.Equal(t, http.StatusOK, b.code, string(b.body))
	assert.True(t, b.replayed)
	assert.JSONEq(t, string(a.body), string(b.body), "the same task")

	fleet := `{"labels": {"site": "lobby"}, "plan": "steps: [{tool: echo}]"}`
	a = ts.postKeyed("/api/fleets", "f-1", fleet)
	require.Equal(t, http.StatusOK, a.code, string(a.body))
	b = ts.postKeyed("/api/fleets", "f-1", fleet)
	assert.True(t, b.replayed)
	assert.JSONEq(t, string(a.body), string(b.body), "the same fleet")
	var f api.FleetResponse
	require.NoError(t, json.Unmarshal(a.body, &f))
	ts.waitTask(f.SessionID)

	assert.Equal(t, http.StatusUnprocessableEntity, ts.postKeyed("/api/fleets", "d-1", fleet).code,
		"a key is one request's, whatever the endpoint")
	assert.Equal(t, 3, ts.taskCount(), "a dispatch, a fleet and its device's task")
}

func TestARefusedRequestRecordsNoKey(t *testing.T) {
	ts := newTestServer(t)
	token := ts.enroll("kiosk-1")
	dispatch := `{"client_id": "kiosk-1", "request": "steps: [{tool: echo}]"}`
	refused := ts.postKeyed("/api/dispatch", "d-1", dispatch)
	assert.Equal(t, http.StatusNotFound, refused.code, "not online: nothing started")

	dev := ts.mustDial(token)
	dev.register("kiosk-1")
	dev.serveOK()
	ran := ts.postKeyed("/api/dispatch", "d-1", dispatch)
	require.Equal(t, http.StatusOK, ran.code, string(ran.body))
	assert.False(t, ran.replayed, "the repeat of a refused request runs")
}

func TestIdempotencyKeysAreChecked(t *testing.T) {
	ts := newTestServer(t)
	ts.device("kiosk-1")
	for key, want := range map[string]string{
		strings.Repeat("k", 256): "256 characters: want 1 to 255",
		`""`:                     "0 characters: want 1 to 255",
		"two words":              `character 4 is ' '`,
		"ключ":                   "want visible ASCII",
	} {
		a := ts.postKeyed("/api/devices/kiosk-1/commands", key, echoCommand)
		assert.Equal(t, http.StatusBadRequest, a.code, "key %q", key)
		assert.Contains(t, string(a.body), want, "key %q", key)
	}
	req, err := http.NewRequest("POST", ts.http.URL+"/api/dispatch", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+ts.api.Token)
	req.Header.Add(api.IdempotencyKeyHeader, "a")
	req.Header.Add(api.IdempotencyKeyHeader, "b")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "two keys")

	quoted := ts.postKeyedAsync("/api/dispatch", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, `{"client_id": "kiosk-1", "request": "steps: [{tool: echo}]"}`)
	a := <-quoted
	assert.Equal(t, http.StatusOK, a.code, "the IETF draft's quoted form: %s", a.body)
	b := ts.postKeyed("/api/dispatch", `8e03978e-40d5-43e8-bc93-6894a57f9324`, `{"client_id": "kiosk-1", "request": "steps: [{tool: echo}]"}`)
	assert.True(t, b.replayed, "is the same key unquoted")
}

func TestIdempotencyKeysOutliveARestartAndExpireAfterADay(t *testing.T) {
	ts := newTestServer(t)
	token := ts.enroll("kiosk-1")
	dev := ts.mustDial(token)
	dev.register("kiosk-1")
	const path = "/api/devices/kiosk-1/commands"
	first := ts.postKeyedAsync(path, "key-1", echoCommand)
	dev.answer(dev.nextCommand(), protocol.ResultSuccess, "")
	a := <-first
	require.Equal(t, http.StatusOK, a.code, string(a.body))
	dispatch := `{"client_id": "kiosk-1", "request": "steps: [{tool: echo}]"}`
	d := ts.postKeyed("/api/dispatch", "key-2", dispatch)
	require.Equal(t, http.StatusOK, d.code, string(d.body))
	dev.answer(dev.nextCommand(), protocol.ResultSuccess, "")

	// The same data dir, a new server: the keys are still there.
	ts.srv.Shutdown()
	ts.http.Close()
	require.NoError(t, ts.srv.Close())
	again := newTestServer(t, func(c *Config) { c.DataDir, c.Store.URL = ts.dir, ts.srv.cfg.Store.URL })
	b := again.postKeyed(path, "key-1", echoCommand)
	require.Equal(t, http.StatusOK, b.code, string(b.body))
	assert.True(t, b.replayed)
	assert.JSONEq(t, string(a.body), string(b.body))
	e := again.postKeyed("/api/dispatch", "key-2", dispatch)
	assert.True(t, e.replayed)
	assert.JSONEq(t, string(d.body), string(e.body))

	// A day later the janitor has forgotten them: a repeat is a new
	// request.
	again.srv.sessions.Expire(time.Now().Add(tasks.IdempotencyKeyTTL + time.Minute))
	dev = again.mustDial(token)
	dev.register("kiosk-1")
	fresh := again.postKeyedAsync(path, "key-1", echoCommand)
	dev.answer(dev.nextCommand(), protocol.ResultSuccess, "")
	assert.False(t, (<-fresh).replayed)
}

func TestARepeatOfACommandWhoseTaskWasRemovedIsAConflict(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1")
	const path = "/api/devices/kiosk-1/commands"
	first := ts.postKeyedAsync(path, "key-1", echoCommand)
	dev.answer(dev.nextCommand(), protocol.ResultSuccess, "r1")
	dev.ackOf("r1")
	var resp api.CommandResponse
	require.NoError(t, json.Unmarshal((<-first).body, &resp))
	require.NoError(t, ts.api.Do(context.Background(), "DELETE", "/api/tasks/"+resp.SessionID, nil, nil))

	a := ts.postKeyed(path, "key-1", echoCommand)
	assert.Equal(t, http.StatusConflict, a.code)
	assert.Contains(t, string(a.body), "has been removed; use a new key")
	dev.ping() // and nothing was sent
}
