package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
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

// TestAKilledServerLosesNoFinishedResult kills a real aip-server process
// in the middle of sessions, starts it again on the same data dir, and
// checks every session: what had finished is intact, what was running is
// failed "server restarted", and results that arrive afterwards for a
// command of the dead process are still recorded, once.
func TestAKilledServerLosesNoFinishedResult(t *testing.T) {
	bin := testenv.Command(t, "aip-server")
	data := t.TempDir()
	srv := startServerProcess(t, bin, "127.0.0.1:0", data)
	ctx := context.Background()

	// A real agent, and a hand-driven device that will sit on a command.
	seen := make(chan string, 100)
	cfg := agent.Config{
		ID: "kiosk-1", ServerURL: srv.wsURL(), TokenFile: srv.enroll(t, "kiosk-1"),
		ToolDirs: []string{"stock=" + testenv.StockToolsDir(t), "fixtures=" + testenv.TestdataTools()},
		DataDir:  t.TempDir(), CompileCacheDir: sharedCompileCache(t), HeartbeatInterval: 100 * time.Millisecond,
		Limits: sandbox.Limits{Timeout: time.Minute}, Logger: testLogger(),
	}
	watchLog(seen)(&cfg)
	runAgent(t, cfg)
	raw := dialDevice(t, srv.wsURL(), srv.enrollToken(t, "raw-1"), "raw-1")
	require.Eventually(t, func() bool { return srv.online(t, "kiosk-1") }, 20*time.Second, 20*time.Millisecond)

	// Finished before the kill: a single command and a plan.
	single, err := srv.api.Command(ctx, "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo", Parameters: map[string]any{"n": 1}}}})
	require.NoError(t, err)
	require.True(t, single.Succeeded(), "%+v", single.Results)
	done, err := srv.api.Dispatch(ctx, api.DispatchRequest{ClientID: "kiosk-1", TaskName: "finished-plan",
		Request: "steps: [{tool: fixtures.echo, parameters: {a: 1}}, {tool: echo, parameters: {b: 2}}]"})
	require.NoError(t, err)
	finished := waitEnded(t, srv.api, done.SessionID)
	require.Equal(t, api.StateCompleted, finished.State, finished.Error)

	// Running at the kill: a plan on the agent, stuck in a spinning tool,
	// and one whose command the hand-driven device holds.
	spinning, err := srv.api.Dispatch(ctx, api.DispatchRequest{ClientID: "kiosk-1", Request: "steps: [{tool: spin, timeout: 1m}]"})
	require.NoError(t, err)
	waitForLog(t, seen, "command received")
	held, err := srv.api.Dispatch(ctx, api.DispatchRequest{ClientID: "raw-1", Request: "steps: [{tool: echo, timeout: 1m}]"})
	require.NoError(t, err)
	heldCmd := raw.next(t, protocol.ServerCommand)

	srv.kill(t)
	raw.conn.CloseNow()
	srv = startServerProcess(t, bin, srv.addr, data)

	// Every session is where it should be.
	for id, want := range map[string]api.TaskState{
		single.SessionID: api.StateCompleted, done.SessionID: api.StateCompleted,
		spinning.SessionID: api.StateFailed, held.SessionID: api.StateFailed,
	} {
		task, err := srv.api.Task(ctx, id)
		require.NoError(t, err, id)
		assert.Equal(t, want, task.State, id)
		if want == api.StateFailed {
			assert.Equal(t, "server restarted", task.Error, id)
			require.Len(t, task.Commands, 1, id)
			assert.Equal(t, "failed", task.Commands[0].Status, id)
		}
	}
	// Finished results are intact, byte for byte.
	again, err := srv.api.Task(ctx, done.SessionID)
	require.NoError(t, err)
	assert.JSONEq(t, string(finished.Result), string(again.Result))
	var res api.TaskResult
	require.NoError(t, srv.api.Do(ctx, "GET", "/api/task_result/finished-plan", nil, &res))
	assert.Equal(t, "done", res.Status)
	assert.JSONEq(t, string(finished.Result), string(res.Result))
	singleTask, err := srv.api.Task(ctx, single.SessionID)
	require.NoError(t, err)
	var singleResp api.CommandResponse
	require.NoError(t, json.Unmarshal(singleTask.Result, &singleResp))
	assert.Equal(t, single.Results[0].Result, singleResp.Results[0].Result)

	// The held command's results arrive after the restart: recorded, late,
	// once.
	raw = dialDevice(t, srv.wsURL(), raw.token, "raw-1")
	for _, requestID := range []string{"late-1", "late-again"} {
		raw.send(t, &protocol.ClientMessage{Type: protocol.ClientCommandResults, Status: protocol.StatusContinue, ClientID: "raw-1",
			SessionID: heldCmd.SessionID, PrevResponseID: heldCmd.ResponseID, RequestID: requestID,
			ActionResults: []protocol.Result{{Status: protocol.ResultSuccess, Result: "late but here", CallID: heldCmd.Actions[0].CallID}}})
		assert.Equal(t, requestID, raw.next(t, protocol.ServerHeartbeat).ResponseID, "acknowledged")
	}
	task, err := srv.api.Task(ctx, held.SessionID)
	require.NoError(t, err)
	assert.Equal(t, "done", task.Commands[0].Status)
	assert.True(t, task.Commands[0].Late)
	assert.Equal(t, "late but here", task.Commands[0].Results[0].Result)
	var audit []api.AuditEntry
	require.NoError(t, srv.api.Do(ctx, "GET", "/api/audit?session="+held.SessionID, nil, &audit))
	require.Len(t, audit, 2, "the failure at restart, then the late results once")
	assert.Equal(t, protocol.ResultFailure, audit[0].Outcome)
	assert.True(t, audit[1].Late)

	// The agent found the new process on its own and serves again.
	require.Eventually(t, func() bool { return srv.online(t, "kiosk-1") }, 60*time.Second, 50*time.Millisecond)
	resp, err := srv.api.Command(ctx, "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
	require.NoError(t, err)
	assert.True(t, resp.Succeeded(), "%+v", resp.Results)
}

// A second aip-server process on a live server's data dir exits at once,
// naming the dir and the process that holds it, and leaves the first one's
// running task alone.
func TestASecondServerProcessOnTheSameDataDirExitsNamingTheFirst(t *testing.T) {
	bin := testenv.Command(t, "aip-server")
	data := t.TempDir()
	first := startServerProcess(t, bin, "127.0.0.1:0", data)
	raw := dialDevice(t, first.wsURL(), first.enrollToken(t, "raw-1"), "raw-1")
	ctx := context.Background()
	d, err := first.api.Dispatch(ctx, api.DispatchRequest{ClientID: "raw-1", Request: "steps: [{tool: echo}]"})
	require.NoError(t, err)
	cmd := raw.next(t, protocol.ServerCommand)

	// Bounded, for a second server that would run instead of exiting.
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(sctx, bin, "--listen", "127.0.0.1:0", "--data", data).CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, string(out), fmt.Sprintf("data dir %s is in use by another process (pid %d)", data, first.cmd.Process.Pid))

	raw.send(t, &protocol.ClientMessage{Type: protocol.ClientCommandResults, Status: protocol.StatusContinue, ClientID: "raw-1",
		SessionID: cmd.SessionID, PrevResponseID: cmd.ResponseID, RequestID: "res-1",
		ActionResults: []protocol.Result{{Status: protocol.ResultSuccess, Result: "ran", CallID: cmd.Actions[0].CallID}}})
	task := waitEnded(t, first.api, d.SessionID)
	assert.Equal(t, api.StateCompleted, task.State, "the first server's task was not failed as \"server restarted\": %s", task.Error)
}

// serverProcess is aip-server running as a child process.
type serverProcess struct {
	cmd  *exec.Cmd
	addr string
	api  *api.Client
	done chan struct{}
	logs testenv.LogBuffer // its stderr
}

var listeningRe = regexp.MustCompile(`msg="aip-server listening" addr=(\S+) .*tls=(true|false)`)

// startServerProcess runs aip-server on listen and data, with more flags
// in args. Over TLS (--tls-cert), its api client must be given the CA.
func startServerProcess(t testing.TB, bin, listen, data string, args ...string) *serverProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--listen", listen, "--data", data}, args...)...)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &serverProcess{cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() { p.kill(t) })
	listening := make(chan []string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if os.Getenv("E2E_LOG") != "" {
				fmt.Fprintln(os.Stderr, "aip-server:", sc.Text())
			}
			fmt.Fprintln(&p.logs, sc.Text())
			if m := listeningRe.FindStringSubmatch(sc.Text()); m != nil {
				listening <- m
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	scheme := "http"
	select {
	case m := <-listening:
		p.addr = m[1]
		if m[2] == "true" {
			scheme = "https"
		}
	case <-time.After(30 * time.Second):
		t.Fatal("aip-server did not start listening")
	}
	token, err := os.ReadFile(filepath.Join(data, "admin.token"))
	require.NoError(t, err)
	p.api = &api.Client{BaseURL: scheme + "://" + p.addr, Token: strings.TrimSpace(string(token))}
	return p
}

// kill ends the process with SIGKILL: no shutdown, no flush.
func (p *serverProcess) kill(t testing.TB) {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	<-p.done
}

func (p *serverProcess) wsURL() string {
	return "ws" + strings.TrimPrefix(p.api.BaseURL, "http") + "/ws"
}

func (p *serverProcess) enrollToken(t testing.TB, id string) string {
	t.Helper()
	resp, err := p.api.Enroll(context.Background(), api.EnrollRequest{ID: id})
	require.NoError(t, err)
	return resp.Token
}

func (p *serverProcess) enroll(t *testing.T, id string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), id+".token")
	require.NoError(t, os.WriteFile(f, []byte(p.enrollToken(t, id)), 0o600))
	return f
}

func (p *serverProcess) online(t *testing.T, id string) bool {
	var d api.Device
	return p.api.Do(context.Background(), "GET", "/api/devices/"+id, nil, &d) == nil && d.Online
}

func waitEnded(t *testing.T, c *api.Client, id string) api.Task {
	t.Helper()
	var task api.Task
	require.Eventually(t, func() bool {
		var err error
		task, err = c.Task(context.Background(), id)
		return err == nil && task.State.Ended()
	}, 30*time.Second, 20*time.Millisecond, "task %s never ended", id)
	return task
}

// rawDevice is a device driven by hand over AIP.
type rawDevice struct {
	conn  *protocol.Conn
	token string
}

func dialDevice(t *testing.T, url, token, id string) *rawDevice {
	t.Helper()
	ctx := context.Background()
	conn, _, err := protocol.Dial(ctx, url, protocol.DialOptions{Header: http.Header{"Authorization": {"Bearer " + token}}, Encoding: protocol.CBOR})
	require.NoError(t, err)
	t.Cleanup(func() { conn.CloseNow() })
	d := &rawDevice{conn: conn, token: token}
	d.send(t, &protocol.ClientMessage{Type: protocol.ClientRegister, Status: protocol.StatusOK, ClientType: protocol.ClientDevice, ClientID: id})
	d.next(t, protocol.ServerHeartbeat)
	return d
}

func (d *rawDevice) send(t *testing.T, m *protocol.ClientMessage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, d.conn.Send(ctx, m))
}

func (d *rawDevice) next(t *testing.T, typ protocol.ServerMessageType) protocol.ServerMessage {
	t.Helper()
	// A generous bound: the message may wait on a tool's first compile,
	// which on a loaded machine with a cold cache takes tens of seconds.
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Slowdown*90*time.Second)
	defer cancel()
	var m protocol.ServerMessage
	require.NoError(t, d.conn.Read(ctx, &m))
	require.Equal(t, typ, m.Type, "%+v", m)
	return m
}
