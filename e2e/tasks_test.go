package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A constellation asks for a plan on a real agent: namespaced tools, a
// batch step, and a TASK_END back to it alone; the audit log names each
// module by its sha256.
func TestAConstellationRunsAPlanOnARealAgent(t *testing.T) {
	c := newCluster(t)
	files := t.TempDir()
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), withMounts(sandbox.Mount{HostPath: files, GuestPath: files}))
	note := filepath.Join(files, "note.txt")

	con := dialConstellation(t, c, "orch-1", "kiosk-1")
	plan := `
task_name: write-then-check
steps:
  - tool: stock.write_file
    parameters: {path: ` + note + `, content: hello}
  - actions:
      - {tool: stock.read_file, parameters: {path: ` + note + `}}
      - {tool: hash_file, parameters: {path: ` + note + `}}
`
	con.send(t, &protocol.ClientMessage{Type: protocol.ClientTask, Status: protocol.StatusContinue, ClientType: protocol.ClientConstellation,
		ClientID: "orch-1", SessionID: "s-real", Request: plan, RequestID: "t1"})
	assert.Equal(t, "t1", con.next(t, protocol.ServerHeartbeat).ResponseID, "the task is acknowledged")
	end := con.next(t, protocol.ServerTaskEnd)
	require.Equal(t, protocol.StatusCompleted, end.Status, end.Error)
	assert.Equal(t, "s-real", end.SessionID)
	b, err := json.Marshal(end.Result)
	require.NoError(t, err)
	var result api.PlanResult
	require.NoError(t, json.Unmarshal(b, &result))
	require.Len(t, result.Steps, 2)
	batch := result.Steps[1].Results
	require.Len(t, batch, 2)
	assert.Equal(t, "hello", batch[0].Result.(map[string]any)["content"])
	sum := sha256.Sum256([]byte("hello"))
	assert.Equal(t, hex.EncodeToString(sum[:]), batch[1].Result.(map[string]any)["sha256"])

	var audit []api.AuditEntry
	require.NoError(t, c.api.Do(context.Background(), "GET", "/api/audit?session=s-real", nil, &audit))
	require.Len(t, audit, 3)
	for i, name := range []string{"write_file", "read_file", "hash_file"} {
		wasm, err := os.ReadFile(filepath.Join(testenv.StockToolsDir(t), name+".wasm"))
		require.NoError(t, err)
		sum := sha256.Sum256(wasm)
		assert.Equal(t, hex.EncodeToString(sum[:]), audit[i].ModuleSHA256, name)
		assert.Equal(t, "stock", audit[i].Namespace, name)
		assert.Equal(t, "constellation:orch-1", audit[i].Actor, name)
		assert.Equal(t, protocol.ResultSuccess, audit[i].Outcome, name)
	}
}

// A plan step whose first attempt fails retries while the device's link
// is cut: the retry waits for the device to register again, within the
// device's grace and the step's timeout, and the plan completes.
func TestARetryDuringACutLinkWaitsForTheDeviceAndCompletes(t *testing.T) {
	c := newCluster(t)
	proxy := newCutProxy(t, c.hostPort())
	files := t.TempDir()
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), withMounts(sandbox.Mount{HostPath: files, GuestPath: files}),
		func(cfg *agent.Config) { cfg.ServerURL = "ws://" + proxy.addr() + "/ws" })
	late := filepath.Join(files, "late.txt")
	d, err := c.api.Dispatch(context.Background(), api.DispatchRequest{ClientID: "kiosk-1",
		Request: `steps: [{tool: stock.read_file, parameters: {path: ` + late + `}, retries: 1, backoff: 3s, timeout: 30s}]`})
	require.NoError(t, err)
	commands := func(n int, status string) func() bool {
		return func() bool {
			task, err := c.api.Task(context.Background(), d.SessionID)
			return err == nil && len(task.Commands) == n && task.Commands[n-1].Status == status
		}
	}
	require.Eventually(t, commands(1, "done"), 10*time.Second, 5*time.Millisecond, "the first attempt never failed")

	// The link goes during the backoff, and stays gone until the retry
	// has started.
	proxy.hold()
	proxy.cut()
	c.waitOnline("kiosk-1", false)
	require.NoError(t, os.WriteFile(late, []byte("here now"), 0o644))
	require.Eventually(t, commands(2, "pending"), 20*time.Second, 10*time.Millisecond, "the retry never started")
	proxy.release()

	var task api.Task
	require.Eventually(t, func() bool {
		task, err = c.api.Task(context.Background(), d.SessionID)
		return err == nil && task.State.Ended()
	}, 30*time.Second, 20*time.Millisecond, "the plan never ended")
	require.Equal(t, api.StateCompleted, task.State, task.Error)
	var result api.PlanResult
	require.NoError(t, json.Unmarshal(task.Result, &result))
	assert.Equal(t, 2, result.Steps[0].Attempts)
	assert.Equal(t, "here now", result.Steps[0].Results[0].Result.(map[string]any)["content"])
}

// dialConstellation registers a constellation client, by hand, with the
// operator token.
func dialConstellation(t *testing.T, c *cluster, id, target string) *rawDevice {
	t.Helper()
	conn, _, err := protocol.Dial(context.Background(), c.wsURL(), protocol.DialOptions{
		Header: http.Header{"X-API-Key": {c.api.Token}}, Encoding: protocol.CBOR})
	require.NoError(t, err)
	t.Cleanup(func() { conn.CloseNow() })
	d := &rawDevice{conn: conn}
	d.send(t, &protocol.ClientMessage{Type: protocol.ClientRegister, Status: protocol.StatusOK, ClientType: protocol.ClientConstellation, ClientID: id, TargetID: target})
	d.next(t, protocol.ServerHeartbeat)
	return d
}

// An operator's cancellation (POST /api/tasks/{id}/cancel, aipctl cancel)
// stops the wasm call on the device, as an MCP client's does: the looping
// fixture's result says who cancelled it, long before its deadline.
func TestCancellingATaskStopsTheToolOnTheDevice(t *testing.T) {
	c := newCluster(t)
	seen := make(chan string, 1000) // what it logs until the command comes
	c.startAgent("kiosk-1", c.enroll("kiosk-1"), watchLog(seen))
	ctx := context.Background()
	d, err := c.api.Dispatch(ctx, api.DispatchRequest{ClientID: "kiosk-1", Request: "steps: [{tool: spin, timeout: 5m}]"})
	require.NoError(t, err)
	// Cancelled once the device has the command: a cancel that comes
	// first finds nothing to stop there.
	waitForLog(t, seen, "command received")

	task, err := c.api.CancelTask(ctx, d.SessionID)
	require.NoError(t, err)
	assert.Equal(t, api.StateCancelled, task.State)
	require.Eventually(t, func() bool {
		task, err = c.api.Task(ctx, d.SessionID)
		require.NoError(t, err)
		return len(task.Commands) == 1 && task.Commands[0].Status == "done"
	}, 20*time.Second, 50*time.Millisecond, "the device answers the cancelled command")
	require.Len(t, task.Commands[0].Results, 1)
	res := task.Commands[0].Results[0]
	assert.Equal(t, protocol.ResultFailure, res.Status)
	assert.Contains(t, res.Error, "cancelled by the server: cancelled by admin")
}
