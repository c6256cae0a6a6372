package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// PostgreSQL goes away while a command is out: the device answers, and
// the server cannot record the answer. As on a full disk, the caller
// hears so, naming PostgreSQL, /api/health says degraded, and once
// PostgreSQL is back the results land, the device is acknowledged on its
// link, and the task ends with them: nothing the device sent is lost.
func TestResultsPostgreSQLCannotTakeAreKeptAndRecordedOnceItIsBack(t *testing.T) {
	pg := pgtest.Start(t)
	ts := newTestServer(t, func(c *Config) { c.Store.URL = pg.NewDatabase(t) })
	dev := ts.device("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	single := ts.echoInBackground("kiosk-1")
	cmd := dev.nextCommand()

	require.NoError(t, pg.Stop())
	dev.send(*dev.results(cmd, protocol.ResultSuccess, "res-1"))
	resp := <-single
	require.Equal(t, "failure", resp.Status)
	assert.Contains(t, resp.FirstError(), `device "kiosk-1" answered, but the server could not record its results: PostgreSQL: `)
	assert.Contains(t, resp.FirstError(), "it keeps them and records them once it can")
	code, h := ts.health()
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "degraded", h.Status)
	assert.Contains(t, h.Cause, "PostgreSQL")
	dev.ping() // nothing acknowledged while it is away

	require.NoError(t, pg.Start())
	dev.ackOf("res-1") // acknowledged once recorded
	task := ts.waitTask(resp.SessionID)
	assert.Equal(t, api.StateFailed, task.State, "as the operator was told")
	require.Len(t, task.Commands, 1)
	assert.Equal(t, "done", task.Commands[0].Status, "the device's results are recorded")
	assert.True(t, task.Commands[0].Late)
	require.Eventually(t, func() bool { code, _ = ts.health(); return code == http.StatusOK }, 10*time.Second, 10*time.Millisecond)

	// And the server goes on: a new command runs and is recorded.
	again := ts.echoInBackground("kiosk-1")
	next := dev.nextCommand()
	dev.send(*dev.results(next, protocol.ResultSuccess, "res-2"))
	assert.Equal(t, "success", (<-again).Status)
}
