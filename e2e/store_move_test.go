package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/pgtest"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// answerEcho answers every command on d with success, until its link
// closes.
func answerEcho(d *rawDevice, id string) {
	ctx := context.Background()
	for {
		var m protocol.ServerMessage
		if err := d.conn.Read(ctx, &m); err != nil {
			return
		}
		if m.Type != protocol.ServerCommand {
			continue
		}
		results := make([]protocol.Result, len(m.Actions))
		for i, a := range m.Actions {
			results[i] = protocol.Result{Status: protocol.ResultSuccess, Result: a.Parameters, CallID: a.CallID}
		}
		d.conn.Send(ctx, &protocol.ClientMessage{Type: protocol.ClientCommandResults, Status: protocol.StatusContinue, ClientID: id,
			SessionID: m.SessionID, PrevResponseID: m.ResponseID, RequestID: "r-" + m.ResponseID, ActionResults: results})
	}
}

// echo runs echo on device through c and returns the task's id.
func echo(t *testing.T, c *api.Client, device string, n int) string {
	t.Helper()
	resp, err := c.Command(context.Background(), device, api.CommandRequest{
		Actions: []protocol.Command{{ToolName: "echo", Parameters: map[string]any{"n": float64(n)}}}, Timeout: "30s"})
	require.NoError(t, err)
	require.True(t, resp.Succeeded(), "%+v", resp.Results)
	return resp.SessionID
}

// runCLI runs aip-server with args and returns its output and whether it
// exited 0.
func runCLI(t *testing.T, bin string, args ...string) (string, bool) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	if err != nil {
		_, exited := err.(*exec.ExitError)
		require.True(t, exited, "%v: %s", err, out)
	}
	return string(out), err == nil
}

// A backup taken with aip-server backup while the server runs commands
// is a store a server starts on: the devices, their tokens and every
// task that ended before the backup are there.
func TestABackupOfARunningServerStartsAServerOfItsOwn(t *testing.T) {
	bin := testenv.Command(t, "aip-server")
	data := t.TempDir()
	srv := startServerProcess(t, bin, "127.0.0.1:0", data)
	token := srv.enrollToken(t, "raw-1")
	go answerEcho(dialDevice(t, srv.wsURL(), token, "raw-1"), "raw-1")
	var before []string
	for i := range 5 {
		before = append(before, echo(t, srv.api, "raw-1", i))
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // writes go on while the backup is taken
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			srv.api.Command(context.Background(), "raw-1", api.CommandRequest{
				Actions: []protocol.Command{{ToolName: "echo", Parameters: map[string]any{"busy": float64(i)}}}, Timeout: "30s"})
		}
	})
	time.Sleep(100 * time.Millisecond)
	file := filepath.Join(t.TempDir(), "edgeaip-backup.db")
	out, ok := runCLI(t, bin, "backup", "--data", data, "--to", file)
	close(stop)
	wg.Wait()
	require.True(t, ok, out)
	assert.Contains(t, out, "backed up "+data+" to "+file)
	out, ok = runCLI(t, bin, "backup", "--data", data, "--to", file)
	assert.False(t, ok)
	assert.Contains(t, out, "exists", "a backup is never overwritten")

	restored := t.TempDir()
	require.NoError(t, os.Rename(file, filepath.Join(restored, "edgeaip.db")))
	admin, err := os.ReadFile(filepath.Join(data, "admin.token"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(restored, "admin.token"), admin, 0o600))
	again := startServerProcess(t, bin, "127.0.0.1:0", restored)
	for _, id := range before {
		task, err := again.api.Task(context.Background(), id)
		require.NoError(t, err, id)
		assert.Equal(t, api.StateCompleted, task.State, id)
	}
	go answerEcho(dialDevice(t, again.wsURL(), token, "raw-1"), "raw-1")
	echo(t, again.api, "raw-1", 99) // the device's token works there
}

// aip-server store copy moves a single node's fleet into PostgreSQL: not
// while its server runs, once; a server started with --store on it
// serves the same devices, tokens, tasks and operator token.
func TestStoreCopyMovesAFleetIntoPostgreSQL(t *testing.T) {
	url := pgtest.Shared(t).NewDatabase(t)
	bin := testenv.Command(t, "aip-server")
	data := t.TempDir()
	srv := startServerProcess(t, bin, "127.0.0.1:0", data)
	token := srv.enrollToken(t, "raw-1")
	srv.enrollToken(t, "kiosk-2")
	go answerEcho(dialDevice(t, srv.wsURL(), token, "raw-1"), "raw-1")
	var tasks []string
	for i := range 5 {
		tasks = append(tasks, echo(t, srv.api, "raw-1", i))
	}

	out, ok := runCLI(t, bin, "store", "copy", "--from", data, "--to", url)
	assert.False(t, ok)
	assert.Contains(t, out, fmt.Sprintf("is in use by another process (pid %d)", srv.cmd.Process.Pid))
	srv.kill(t)

	out, ok = runCLI(t, bin, "store", "copy", "--from", data, "--to", url)
	require.True(t, ok, out)
	assert.Regexp(t, `devices\s+2 rows  digest [0-9a-f]{64}`, out)
	assert.Regexp(t, `commands\s+5 rows`, out)
	assert.Contains(t, out, "each table's count and digest match on both sides")
	out, ok = runCLI(t, bin, "store", "copy", "--from", data, "--to", url)
	assert.False(t, ok)
	assert.Contains(t, out, "target store is not empty")

	pg := startServerProcess(t, bin, "127.0.0.1:0", data, "--store", url)
	assert.Contains(t, pg.logs.String(), "backend=postgres")
	devices, err := pg.api.Devices(context.Background())
	require.NoError(t, err)
	require.Len(t, devices, 2)
	for _, id := range tasks {
		task, err := pg.api.Task(context.Background(), id)
		require.NoError(t, err, id)
		assert.Equal(t, api.StateCompleted, task.State, id)
	}
	go answerEcho(dialDevice(t, pg.wsURL(), token, "raw-1"), "raw-1")
	echo(t, pg.api, "raw-1", 99)
}
