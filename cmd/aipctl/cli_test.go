package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
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

// The tests in this file run aipctl as its users do: the binary, from a
// shell.

// sh runs script in bash with aipctl on the PATH and AIP_SERVER and
// AIP_TOKEN pointing at f's server (f may be nil), and returns its stdout,
// stderr and exit status.
func sh(t *testing.T, f *fleet, script string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = userEnv(t, f)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return out.String(), errOut.String(), exit.ExitCode()
	case err != nil:
		t.Fatalf("bash: %v", err)
	}
	return out.String(), errOut.String(), 0
}

// userEnv is the environment of an operator's shell: aipctl on the PATH,
// and, with f, AIP_SERVER and AIP_TOKEN set for f's server.
func userEnv(t *testing.T, f *fleet) []string {
	t.Helper()
	bin := filepath.Dir(testenv.Command(t, "aipctl"))
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if f != nil {
		env = append(env, "AIP_SERVER="+f.api.BaseURL, "AIP_TOKEN="+f.api.Token)
	}
	return env
}

// Item 8 of issue 24: the help of --token-file says what $AIP_TOKEN
// holds: the token itself, not a file.
func TestTokenFileHelpSaysAIPTokenHoldsTheTokenItself(t *testing.T) {
	out, _, code := sh(t, nil, "aipctl --help")
	require.Equal(t, exitOK, code)
	assert.Regexp(t, `--token-file string\s+file holding the operator token \(default: the token itself, from \$AIP_TOKEN\)`, out)
}

// Item 6 of issue 24: dispatch prints the task's id alone on stdout, so
// that a script can take it; the sentence goes to stderr.
func TestDispatchPrintsTheTaskIDAloneForScripts(t *testing.T) {
	f := newFleet(t, map[string]map[string]string{"kiosk-1": lobby})
	plan := f.plan("steps: [{tool: echo, parameters: {n: 1}}]\n")
	out, errOut, code := sh(t, f, `ID=$(aipctl dispatch kiosk-1 `+plan+`) && aipctl -o json task "$ID" --wait >/dev/null && echo "id=$ID"`)
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `^id=[0-9a-f-]{36}\n$`, out)
	assert.Regexp(t, `^task started on 1 device\(s\); follow it with: aipctl task [0-9a-f-]{36} --wait\n$`, errOut)

	out, errOut, code = sh(t, f, `aipctl -o json dispatch kiosk-1 `+plan)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, `"session_id"`, "-o json prints the response, as before")
}

// Item 2 of issue 24: aipctl parses a plan before it sends it, and says
// where each problem is: file, line, column and key path, with the key
// most likely meant; a misspelt tool gets the nearest one the device has.
func TestAPlanThatDoesNotParseIsReportedWhereItIs(t *testing.T) {
	f := newFleet(t, map[string]map[string]string{"kiosk-1": lobby})
	dir := t.TempDir()
	write := func(name, doc string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o644))
	}
	write("unclosed.yaml", "task_name: x\nsteps:\n  - tool: echo\n    parameters: {path: /x\n  - tool: echo\n")
	write("typos.yaml", "steps:\n  - tool: echo\n    paramters: {n: 1}\n  - tool: echo\n    retries: many\n")
	write("tool.yaml", "steps:\n  - tool: fixtures.ecko\n  - tool: sleeep\n")

	_, errOut, code := sh(t, f, "cd "+dir+" && aipctl dispatch kiosk-1 unclosed.yaml")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "aipctl: unclosed.yaml: the plan is not valid:\n"+
		`  unclosed.yaml:4:17: this "{" is not closed: a "}", or a "," between its entries, is missing`+"\n", errOut)

	_, errOut, code = sh(t, f, "cd "+dir+" && aipctl dispatch kiosk-1 - < typos.yaml")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "aipctl: <stdin>: the plan is not valid:\n"+
		"  <stdin>:3:5: steps[0].paramters: unknown key; did you mean parameters?\n"+
		`  <stdin>:5:14: steps[1].retries: want a whole number, got "many"`+"\n", errOut)
	assert.NotRegexp(t, `plan\.Step|not found in type|field "request"`, errOut)

	_, errOut, code = sh(t, f, "cd "+dir+" && aipctl dispatch kiosk-1 tool.yaml")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `steps[0].tool: device "kiosk-1" has no tool "fixtures.ecko"; did you mean fixtures.echo?`)
	assert.Contains(t, errOut, `steps[1].tool: device "kiosk-1" has no tool "sleeep"; did you mean sleep?`)
}

// Item 1 of issue 24: a plan is checked whole before anything runs:
// plan validate and dispatch --dry-run ask the server's admission stage
// and list every problem at once; for an offline device they say that
// what it was checked against may be stale.
func TestPlanValidateAndDryRunListEveryProblemBeforeAnythingRuns(t *testing.T) {
	f := newFleet(t, map[string]map[string]string{"kiosk-1": lobby})
	_, err := f.api.Enroll(t.Context(), api.EnrollRequest{ID: "kiosk-off", Labels: map[string]string{"site": "attic"}})
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(name, doc string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o644))
	}
	write("good.yaml", "steps:\n  - tool: fixtures.echo\n    parameters: {n: 1}\n")
	write("bad.yaml", "steps:\n  - tool: fixtures.echo\n  - tool: ech0\n  - tool: fail\n  - tool: fixtures.slep\n")
	run := func(args string) (string, string, int) { return sh(t, f, "cd "+dir+" && aipctl "+args) }

	out, errOut, code := run("plan validate good.yaml")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "good.yaml: valid; pass --device or --label to check it against devices\n", out)

	out, errOut, code = run("plan validate good.yaml --device kiosk-1")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "good.yaml: would run on kiosk-1\n", out)

	out, _, code = run("plan validate bad.yaml --device kiosk-1")
	assert.Equal(t, exitFailed, code)
	assert.Equal(t, "bad.yaml: would be refused:\n"+
		`  steps[1].tool: device "kiosk-1" has no tool "ech0"; did you mean echo?`+"\n"+
		`  steps[3].tool: device "kiosk-1" has no tool "fixtures.slep"; did you mean fixtures.sleep?`+"\n", out)

	out, _, code = run("dispatch --dry-run --label site=lobby bad.yaml")
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, out, "bad.yaml: would be refused:\n", "dispatch --dry-run says the same")

	// An offline device is checked against its last registration, which
	// may be stale.
	f.stopAgent("kiosk-1")
	out, errOut, code = run("dispatch --dry-run kiosk-1 good.yaml")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `^good.yaml: would run on kiosk-1\n`+
		`note: kiosk-1 is offline \(last seen \d+s ago\): checked against the tools of its last registration, which may be stale\n$`, out)
	out, _, code = run("plan validate bad.yaml --device kiosk-1")
	assert.Equal(t, exitFailed, code)
	assert.Contains(t, out, `steps[1].tool: device "kiosk-1" is offline, and its last registration listed no tool "ech0"; did you mean echo?`)
	// One that never registered lists no tools: a bare name is left for it
	// to check, and the note says so.
	write("bare.yaml", "steps: [{tool: echo}]\n")
	out, errOut, code = run("dispatch --dry-run kiosk-off bare.yaml")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "bare.yaml: would run on kiosk-off\n"+
		"note: kiosk-off has never registered: its tools are not known, so no tool was checked\n", out)

	out, _, code = run("-o json plan validate bad.yaml --label site=lobby")
	assert.Equal(t, exitFailed, code)
	var verdict api.AdmissionResponse
	require.NoError(t, json.Unmarshal([]byte(out), &verdict))
	assert.False(t, verdict.Admitted)
	assert.Len(t, verdict.Problems, 2)

	_, errOut, code = run("plan validate good.yaml --device kiosk-1 --label site=lobby")
	assert.Equal(t, exitUsage, code, errOut)

	tasks, err := f.api.Tasks(t.Context(), "", 0)
	require.NoError(t, err)
	assert.Empty(t, tasks, "nothing ran")
}

// Item 4 of issue 24: exec types KEY=VALUE as the tool's schema does
// (content=42 is "42" for a string parameter), says so with -v, and
// refuses a tool the device lacks with the nearest name it has, without
// UFO's internal key.
func TestExecTypesValuesByTheToolsSchema(t *testing.T) {
	f := newFleet(t, nil)
	files := t.TempDir()
	f.startAgent("kiosk-1", lobby, func(c *agent.Config) {
		c.ToolDirs = append(c.ToolDirs, "stock="+testenv.StockToolsDir(t))
		c.Mounts = []sandbox.Mount{{HostPath: files, GuestPath: "/data"}}
	})

	out, errOut, code := sh(t, f, "aipctl exec -v kiosk-1 write_file path=/data/n.txt content=42 append=false")
	require.Equal(t, exitOK, code, "%s%s", out, errOut)
	assert.Equal(t, `content=42: taken as a string "42", as the tool's schema types it`+"\n", errOut, "only what was coerced")
	b, err := os.ReadFile(filepath.Join(files, "n.txt"))
	require.NoError(t, err)
	assert.Equal(t, "42", string(b))

	_, errOut, code = sh(t, f, "aipctl exec kiosk-1 write_file path=/data/n.txt content=x append=maybe")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "aipctl: tool write_file: parameter append=maybe: want true or false\n", errOut)

	_, errOut, code = sh(t, f, "aipctl exec kiosk-1 hash_fiel path=/data/n.txt")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "aipctl: device kiosk-1 has no tool hash_fiel; did you mean hash_file?\n", errOut)
	assert.NotContains(t, errOut, "::")

	// A parameter the schema does not type is read as before: JSON if it
	// is JSON.
	out, errOut, code = sh(t, f, "aipctl exec -v kiosk-1 echo n=3 s=x")
	require.Equal(t, exitOK, code, errOut)
	assert.Empty(t, errOut)
	var results []protocol.Result
	require.NoError(t, json.Unmarshal([]byte(out), &results))
	assert.Equal(t, map[string]any{"n": float64(3), "s": "x"}, results[0].Result)
}

// Item 5 of issue 24: aipctl task on a plan that runs shows where each
// step is, with its attempts and last error, and how long it has been
// running, not how long it "took".
func TestTaskShowsARunningPlansStepsLive(t *testing.T) {
	f := newFleet(t, map[string]map[string]string{"kiosk-1": lobby})
	planFile := f.plan(`task_name: slow
steps:
  - tool: echo
  - {tool: fail, retries: 1, backoff: 100ms, early_exit: false}
  - {tool: spin, timeout: 20s}
  - tool: echo
`)
	id, errOut, code := sh(t, f, "aipctl dispatch kiosk-1 "+planFile)
	require.Equal(t, exitOK, code, errOut)
	id = strings.TrimSpace(id)
	var out string
	require.Eventually(t, func() bool {
		out, _, _ = sh(t, f, "aipctl task "+id)
		return strings.Contains(out, "spin") && regexp.MustCompile(`(?m)^3\s+spin\s+running`).MatchString(out)
	}, 20*time.Second, 100*time.Millisecond, "the spin step never showed running:\n%s", out)
	assert.Regexp(t, `(?m)^state\s+running$`, out)
	assert.Regexp(t, `(?m)^running for\s+\d+\.\ds$`, out)
	assert.NotRegexp(t, `(?m)^took`, out)
	assert.Regexp(t, `(?m)^1\s+echo\s+success\s+1\s*$`, out)
	assert.Regexp(t, `(?m)^2\s+fail\s+failure\s+2\s+\S.*$`, out, "both attempts, and the last one's error")
	assert.Regexp(t, `(?m)^3\s+spin\s+running\s+1\s*$`, out)
	assert.Regexp(t, `(?m)^4\s+echo\s+pending\s+0\s*$`, out)
	assert.Regexp(t, `(?m)^plan \S+ \(slow\) on kiosk-1: running for \d+\.\ds so far$`, out)

	_, _, code = sh(t, f, "aipctl cancel "+id)
	require.Equal(t, exitOK, code)
	out, _, _ = sh(t, f, "aipctl task "+id)
	assert.Regexp(t, `(?m)^took\s+\d+\.\ds$`, out, "once it ended")
}

// Item 7 of issue 24: an agent that stops cleanly closes its link as
// going away; a command for its device then fails at once, "device shut
// down", rather than wait out the reconnect grace, unless the operator
// asks to wait for it.
func TestExecOnADeviceThatShutDownFailsAtOnceUnlessAskedToWait(t *testing.T) {
	f := newFleet(t, nil)
	resp, err := f.api.Enroll(t.Context(), api.EnrollRequest{ID: "kiosk-1", Labels: lobby})
	require.NoError(t, err)
	tokenFile := filepath.Join(t.TempDir(), "kiosk-1.token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(resp.Token), 0o600))
	f.runAgent("kiosk-1", tokenFile)
	f.stopAgent("kiosk-1") // as on SIGTERM

	start := time.Now()
	out, _, code := sh(t, f, "aipctl exec kiosk-1 echo --timeout 1m")
	assert.Equal(t, exitFailed, code)
	assert.Less(t, time.Since(start), 20*time.Second, "at once, not after the minute's grace")
	assert.Contains(t, out, `device \"kiosk-1\" shut down (its agent stopped); to wait for it to come back, send the command with wait_for_device (aipctl exec --wait-for-device)`)

	type result struct {
		out  string
		code int
	}
	waited := make(chan result, 1)
	go func() {
		out, _, code := sh(t, f, "aipctl exec kiosk-1 echo a=1 --wait-for-device --timeout 1m")
		waited <- result{out, code}
	}()
	time.Sleep(time.Second) // the command is parked, waiting; nothing to observe from outside
	select {
	case r := <-waited:
		t.Fatalf("exec --wait-for-device ended before the device came back: %d %s", r.code, r.out)
	default:
	}
	f.runAgent("kiosk-1", tokenFile)
	r := <-waited
	require.Equal(t, exitOK, r.code, r.out)
	assert.Contains(t, r.out, `"a": 1`)
}

// Item 1 of issue 43: a server given as HOST:PORT, without its scheme, is
// refused as a usage error that says what to give, as the agent refuses
// its own, not with url.Parse's words.
func TestAServerWithoutItsSchemeIsRefusedSayingWhatToGive(t *testing.T) {
	_, errOut, code := sh(t, nil, "AIP_TOKEN=x aipctl --server 127.0.0.1:8700 devices")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "aipctl: --server \"127.0.0.1:8700\": want http://HOST:PORT or https://HOST:PORT; did you mean http://127.0.0.1:8700?\n", errOut)

	_, errOut, code = sh(t, nil, "AIP_TOKEN=x AIP_SERVER=ws://aip:8700/ws aipctl devices")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "aipctl: AIP_SERVER \"ws://aip:8700/ws\": want http://HOST:PORT or https://HOST:PORT\n", errOut)
}

// handDevice is a device driven by hand over AIP, to answer a command
// when a test says: in time, or once the command has failed.
type handDevice struct {
	t    *testing.T
	id   string
	conn *protocol.Conn
}

// dialHand enrolls device id on f's server and registers it by hand.
func dialHand(t *testing.T, f *fleet, id string) *handDevice {
	t.Helper()
	resp, err := f.api.Enroll(t.Context(), api.EnrollRequest{ID: id})
	require.NoError(t, err)
	conn, _, err := protocol.Dial(t.Context(), f.wsURL, protocol.DialOptions{
		Header: http.Header{"Authorization": {"Bearer " + resp.Token}}, Encoding: protocol.CBOR})
	require.NoError(t, err)
	t.Cleanup(func() { conn.CloseNow() })
	d := &handDevice{t: t, id: id, conn: conn}
	d.send(&protocol.ClientMessage{Type: protocol.ClientRegister, Status: protocol.StatusOK, ClientType: protocol.ClientDevice, ClientID: id})
	d.next(protocol.ServerHeartbeat)
	return d
}

func (d *handDevice) send(m *protocol.ClientMessage) {
	d.t.Helper()
	require.NoError(d.t, d.conn.Send(d.t.Context(), m))
}

// next is the next message of type typ, past any other.
func (d *handDevice) next(typ protocol.ServerMessageType) protocol.ServerMessage {
	d.t.Helper()
	for {
		var m protocol.ServerMessage
		require.NoError(d.t, d.conn.Read(d.t.Context(), &m))
		if m.Type == typ {
			return m
		}
	}
}

// answer sends cmd's results: result, a success, for each action.
func (d *handDevice) answer(cmd protocol.ServerMessage, result string) {
	d.t.Helper()
	var results []protocol.Result
	for _, a := range cmd.Actions {
		results = append(results, protocol.Result{Status: protocol.ResultSuccess, Result: result, CallID: a.CallID})
	}
	d.send(&protocol.ClientMessage{Type: protocol.ClientCommandResults, Status: protocol.StatusContinue, ClientID: d.id,
		SessionID: cmd.SessionID, PrevResponseID: cmd.ResponseID, RequestID: "r-" + cmd.ResponseID, ActionResults: results})
	d.next(protocol.ServerHeartbeat) // acknowledged
}

// Item 3 of issue 43: aipctl task shows each step's results, as its help
// says, and those that came late, after their step had failed, saying so.
func TestTaskShowsEachStepsResultsAndWhichCameLate(t *testing.T) {
	f := newFleet(t, nil)
	d := dialHand(t, f, "hand-1")
	planFile := f.plan("steps: [{tool: echo}, {tool: echo, timeout: 1s}]\n")
	id, errOut, code := sh(t, f, "aipctl dispatch hand-1 "+planFile)
	require.Equal(t, exitOK, code, errOut)
	id = strings.TrimSpace(id)

	d.answer(d.next(protocol.ServerCommand), "in time")
	second := d.next(protocol.ServerCommand)
	_, _, code = sh(t, f, "aipctl task "+id+" --wait") // until the second step times out
	require.Equal(t, exitFailed, code)
	d.answer(second, "too late")

	out, errOut, code := sh(t, f, "aipctl task "+id)
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `(?m)^1\s+echo\s+success\s+1\s*$`, out)
	assert.Regexp(t, `(?m)^2\s+echo\s+failure \(results came late\)\s+1\s+\S.*$`, out)
	assert.Regexp(t, `(?s)\nRESULTS\nstep 1 echo\n  \[\n.*"result": "in time".*\nstep 2 echo: came late, after the step had failed; recorded all the same\n  \[\n.*"result": "too late"`, out)
}

// Item 4 of issue 43: Ctrl-C while exec waits says, as dispatch --wait
// does, that it stopped waiting and the command goes on, and how to wait
// for its outcome again; repeating the call so gets it, run once.
func TestExecInterruptedSaysTheCommandGoesOnAndHowToFollowIt(t *testing.T) {
	f := newFleet(t, nil)
	d := dialHand(t, f, "hand-1")
	cmd := exec.Command(testenv.Command(t, "aipctl"), "exec", "hand-1", "echo", "--idempotency-key", "k-1")
	cmd.Env = userEnv(t, f)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	sent := d.next(protocol.ServerCommand) // the command reached the device
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	err := cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, exitInterrupted, exit.ExitCode())
	assert.Empty(t, out.String())
	assert.Equal(t, "aipctl: stopped waiting; the command goes on on hand-1, if it reached the server: to wait for its outcome again "+
		"without running it twice, repeat this aipctl exec with --idempotency-key k-1 (or find its task with aipctl tasks)\n", errOut.String())

	d.answer(sent, "done")
	again, errText, code := sh(t, f, "aipctl exec hand-1 echo --idempotency-key k-1")
	require.Equal(t, exitOK, code, errText)
	assert.Contains(t, again, `"result": "done"`)
}
