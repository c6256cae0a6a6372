package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// health reads GET /api/health, without the token, as a load balancer
// would.
func (ts *testServer) health() (int, api.Health) {
	ts.t.Helper()
	resp, err := http.Get(ts.http.URL + "/api/health")
	require.NoError(ts.t, err)
	defer resp.Body.Close()
	var h api.Health
	require.NoError(ts.t, json.NewDecoder(resp.Body).Decode(&h))
	return resp.StatusCode, h
}

// bigResults answers cmd with a result of 256 KiB per action: more than a
// full database has room for.
func (rc *rawClient) bigResults(cmd protocol.ServerMessage, requestID string) *protocol.ClientMessage {
	m := rc.results(cmd, protocol.ResultSuccess, requestID)
	for i := range m.ActionResults {
		m.ActionResults[i].Result = strings.Repeat("r", 256<<10)
	}
	return m
}

// fillStore fills the database up: it may not grow (PRAGMA
// max_page_count), and rows fill its pages, so that a write that adds
// anything fails with SQLITE_FULL, as on a full disk.
func (ts *testServer) fillStore() {
	ts.t.Helper()
	if ts.srv.store.Backend() != store.SQLite {
		ts.t.Skip("SQLite only: max_page_count fills a SQLite file; postgres_test.go takes PostgreSQL away instead")
	}
	ctx := context.Background()
	require.NoError(ts.t, ts.srv.store.SetMaxPages(ctx, 0))
	n := 0
	for size := 64 << 10; size >= 8; size /= 2 {
		for {
			n++
			err := ts.srv.store.Write(ctx, func(tx *store.Tx) error {
				return tx.Sessions().Insert(store.Session{ID: fmt.Sprintf("filler-%d", n), DeviceID: "filler", RequesterKind: "operator",
					Kind: "plan", State: "completed", Plan: json.RawMessage(strconv.Quote(strings.Repeat("f", size))), CreatedAt: time.Now()})
			})
			if errors.Is(err, store.ErrUnavailable) {
				break
			}
			require.NoError(ts.t, err)
		}
	}
}

// echoInBackground runs the tool echo on device through the API, with a
// timeout of a minute, and hands over the response when it comes.
func (ts *testServer) echoInBackground(device string) <-chan api.CommandResponse {
	out := make(chan api.CommandResponse, 1)
	go func() {
		resp, err := ts.api.Command(context.Background(), device, api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "1m"})
		assert.NoError(ts.t, err)
		out <- resp
	}()
	return out
}

// The data dir fills while a command and a plan's step are in flight: the
// device answers both, and the server cannot record either answer. The
// operator hears that (not "did not answer"), /api/health says degraded,
// a metric counts the failed writes, and once there is room again the
// results land, the device is acknowledged on the link it is on, and both
// tasks end: nothing waits for the device to reconnect.
func TestResultsTheStoreCannotTakeAreKeptAndRecordedOnceItHasRoom(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	ctx := context.Background()
	single := ts.echoInBackground("kiosk-1")
	singleCmd := dev.nextCommand()
	plan, err := ts.api.Dispatch(ctx, api.DispatchRequest{ClientID: "kiosk-1", Request: "steps: [{tool: echo, timeout: 1m}]"})
	require.NoError(t, err)
	planCmd := dev.nextCommand()
	code, h := ts.health()
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "healthy", h.Status)

	ts.fillStore() // the disk is full
	dev.send(*dev.bigResults(singleCmd, "res-single"))
	dev.send(*dev.bigResults(planCmd, "res-plan"))

	resp := <-single
	require.Equal(t, "failure", resp.Status)
	why := resp.FirstError()
	assert.Contains(t, why, `device "kiosk-1" answered, but the server could not record its results: `)
	assert.Contains(t, why, "database or disk is full")
	assert.NotContains(t, why, "did not answer")
	require.Eventually(t, func() bool {
		task, err := ts.api.Task(ctx, plan.SessionID)
		return err == nil && len(task.Commands) == 1 && ts.srv.tasks.Running(plan.SessionID) == false
	}, 10*time.Second, 10*time.Millisecond, "the plan's step failed at once, and so the plan")

	code, h = ts.health()
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "degraded", h.Status)
	assert.Contains(t, h.Cause, "database or disk is full")
	fams := ts.scrape()
	assert.Positive(t, metric(t, fams, "edgeaip_store_write_failures_total"))
	assert.Positive(t, metric(t, fams, "edgeaip_store_unrecorded_writes"))
	dev.ping() // nothing acknowledged: the device must keep its results

	require.NoError(t, ts.srv.store.SetMaxPages(ctx, 1<<30)) // room again
	acks := map[string]bool{}
	for len(acks) < 2 {
		m := dev.recvType(protocol.ServerHeartbeat)
		acks[m.ResponseID] = true
	}
	assert.Equal(t, map[string]bool{"res-single": true, "res-plan": true}, acks, "acknowledged on the link the device is on")
	for _, id := range []string{resp.SessionID, plan.SessionID} {
		task := ts.waitTask(id)
		assert.Equal(t, api.StateFailed, task.State, "as the operator was told")
		assert.Contains(t, task.Error, "could not record its results")
		require.Len(t, task.Commands, 1)
		c := task.Commands[0]
		assert.Equal(t, "done", c.Status, "the device's results are recorded")
		assert.True(t, c.Late, "after their command had failed")
		assert.Equal(t, strings.Repeat("r", 256<<10), c.Results[0].Result)
	}
	require.Eventually(t, func() bool { code, h = ts.health(); return code == http.StatusOK }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, api.Health{Status: "healthy"}, h)
	assert.Zero(t, metric(t, ts.scrape(), "edgeaip_store_unrecorded_writes"))
}

// Past its bound on kept writes the server keeps no more: results it
// cannot record then stay with the device, unacknowledged, which sends
// them again when it next registers, and the operator is told so.
func TestResultsPastTheBoundOnKeptWritesStayWithTheDevice(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Store.UnrecordedWrites = 1 })
	token := ts.enroll("kiosk-1")
	dev := ts.mustDial(token)
	dev.register("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	ctx := context.Background()
	single := ts.echoInBackground("kiosk-1")
	cmd := dev.nextCommand()
	ts.fillStore()
	results := dev.bigResults(cmd, "res-1")
	dev.send(*results)
	resp := <-single
	assert.Contains(t, resp.FirstError(), `device "kiosk-1" answered, but the server could not record its results: database or disk is full (13); `+
		"the device keeps them and sends them again when it next registers")
	assert.Positive(t, metric(t, ts.scrape(), "edgeaip_store_unrecorded_dropped_total"))

	require.NoError(t, ts.srv.store.SetMaxPages(ctx, 1<<30))
	require.Eventually(t, func() bool { code, _ := ts.health(); return code == http.StatusOK }, 10*time.Second, 10*time.Millisecond)
	dev.ping() // the results were not acknowledged

	again := ts.mustDial(token) // as the agent's outbox does after it registers
	again.register("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	again.send(*results)
	again.ackOf("res-1")
	task := ts.waitTask(resp.SessionID)
	assert.Equal(t, api.StateFailed, task.State)
	require.Len(t, task.Commands, 1)
	assert.Equal(t, "done", task.Commands[0].Status)
	assert.True(t, task.Commands[0].Late)
}
