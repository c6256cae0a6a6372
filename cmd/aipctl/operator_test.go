package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/internal/testpki"
	"github.com/edgeaip/edgeaip/internal/tlsfiles"
	"github.com/edgeaip/edgeaip/internal/version"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/server"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fleet is a real server on loopback with real agents, each running the
// tool fixtures of testdata/tools (echo, fail, spin...), and the global
// flags that point aipctl at it.
type fleet struct {
	t     *testing.T
	api   *api.Client
	flags []string
	wsURL string
	log   *slog.Logger
	// stops stops each device's agent, once.
	stops map[string]func()
	ca    string // the CA file of a fleet served over TLS
}

// newFleet starts a server, plain or, with tlsFiles, over TLS, and an
// agent for each device.
func newFleet(t *testing.T, devices map[string]map[string]string, tlsFiles ...fleetTLS) *fleet {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	data := t.TempDir()
	cfg := server.Config{DataDir: data, Logger: quiet}
	var ca string
	for _, ft := range tlsFiles {
		cfg.TLS, ca = ft.files, ft.ca
	}
	srv, err := server.New(context.Background(), cfg)
	require.NoError(t, err)
	hs := httptest.NewUnstartedServer(srv.Handler())
	if hs.TLS = srv.TLSConfig(); hs.TLS != nil {
		hs.StartTLS()
	} else {
		hs.Start()
	}
	t.Cleanup(func() { srv.Shutdown(); hs.Close(); srv.Close() })
	tokenFile := filepath.Join(data, server.AdminTokenFile)
	token, err := os.ReadFile(tokenFile)
	require.NoError(t, err)
	f := &fleet{t: t, api: &api.Client{BaseURL: hs.URL, Token: strings.TrimSpace(string(token))},
		flags: []string{"--server", hs.URL, "--token-file", tokenFile},
		wsURL: "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws", log: quiet, ca: ca, stops: map[string]func(){}}
	if ca != "" {
		f.flags = append(f.flags, "--ca", ca)
		pool, err := tlsfiles.CertPool(ca)
		require.NoError(t, err)
		f.api.HTTP = api.HTTPClient(&tls.Config{RootCAs: pool})
	}
	for id, labels := range devices {
		f.startAgent(id, labels)
	}
	return f
}

// stopAgent stops the agent of device id, as SIGTERM does, and waits
// until the server has it offline.
func (f *fleet) stopAgent(id string) {
	f.t.Helper()
	f.stops[id]()
	require.Eventually(f.t, func() bool {
		d, err := f.api.Device(context.Background(), id)
		return err == nil && !d.Online
	}, 20*time.Second, 20*time.Millisecond, "%s never went offline", id)
}

// fleetTLS serves a fleet over HTTPS and WSS, with a CA of the test's
// that also signs devices' certificates.
type fleetTLS struct {
	files server.TLSFiles
	ca    string
}

func overTLS(t *testing.T) fleetTLS {
	t.Helper()
	ca, dir := testpki.NewCA(t, "aipctl test CA"), t.TempDir()
	var ft fleetTLS
	ft.files.Cert, ft.files.Key = ca.Issue(t, testpki.Loopback()).Write(t, dir, "server")
	ft.files.DeviceCACert, ft.files.DeviceCAKey = ca.WriteCA(t, dir, "ca")
	ft.ca = ft.files.DeviceCACert
	return ft
}

// startAgent enrolls a device and runs its agent, with the tool fixtures,
// configured further by configure if any.
func (f *fleet) startAgent(id string, labels map[string]string, configure ...func(*agent.Config)) {
	f.t.Helper()
	resp, err := f.api.Enroll(context.Background(), api.EnrollRequest{ID: id, Labels: labels})
	require.NoError(f.t, err)
	tokenFile := filepath.Join(f.t.TempDir(), id+".token")
	require.NoError(f.t, os.WriteFile(tokenFile, []byte(resp.Token), 0o600))
	f.runAgent(id, tokenFile, configure...)
}

// runAgent runs the agent of device id, enrolled with the token in
// tokenFile, and waits until it is online.
func (f *fleet) runAgent(id, tokenFile string, configure ...func(*agent.Config)) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := agent.Config{ID: id, ServerURL: f.wsURL, TokenFile: tokenFile, CAFile: f.ca,
		ToolDirs: []string{"fixtures=" + testenv.TestdataTools()}, DataDir: f.t.TempDir(),
		HeartbeatInterval: time.Second, Limits: sandbox.Limits{Timeout: 5 * time.Second}, Logger: f.log}
	for _, c := range configure {
		c(&cfg)
	}
	a, err := agent.New(ctx, cfg)
	require.NoError(f.t, err)
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx); a.Close(context.Background()) }()
	f.stops[id] = sync.OnceFunc(func() { cancel(); <-done })
	f.t.Cleanup(f.stops[id])
	require.Eventually(f.t, func() bool {
		d, err := f.api.Device(context.Background(), id)
		return err == nil && d.Online
	}, 20*time.Second, 20*time.Millisecond, "%s never came online", id)
}

// ctl runs aipctl against the fleet's server.
func (f *fleet) ctl(args ...string) (string, string, int) {
	f.t.Helper()
	return ctl(f.t, append(append([]string{}, f.flags...), args...)...)
}

// csr writes a certificate request for a new key and returns its path.
func (f *fleet) csr() string {
	f.t.Helper()
	csr, _ := testpki.Request(f.t, "device")
	p := filepath.Join(f.t.TempDir(), "device.csr")
	require.NoError(f.t, os.WriteFile(p, csr, 0o644))
	return p
}

// plan writes a plan file.
func (f *fleet) plan(doc string) string { return f.file("plan.yaml", doc) }

// file writes doc to a file of that name in a fresh dir.
func (f *fleet) file(name, doc string) string {
	f.t.Helper()
	p := filepath.Join(f.t.TempDir(), name)
	require.NoError(f.t, os.WriteFile(p, []byte(doc), 0o644))
	return p
}

var lobby = map[string]string{"site": "lobby"}

func TestOperatorCommandsOnARealFleet(t *testing.T) {
	f := newFleet(t, map[string]map[string]string{"kiosk-1": lobby, "kiosk-2": lobby, "cafe-1": {"site": "cafe"}})

	out, _, code := f.ctl("devices")
	require.Equal(t, exitOK, code)
	assert.Regexp(t, `(?m)^ID\s+ONLINE\s+LAST SEEN\s+PLATFORM\s+AGENT\s+LABELS\s+TOOLS$`, out)
	assert.Regexp(t, `(?m)^kiosk-1\s+true\s+\S+ ago\s+linux/\S+\s+`+regexp.QuoteMeta(version.Version())+`\s+site=lobby\s+\d+$`, out)

	out, _, code = f.ctl("tools", "kiosk-1")
	require.Equal(t, exitOK, code)
	assert.Regexp(t, `(?m)^fixtures\s+echo\s+action\s+none\s+copies stdin to stdout\.$`, out)

	out, _, code = f.ctl("exec", "kiosk-1", "echo", "a=1")
	require.Equal(t, exitOK, code)
	var results []protocol.Result
	require.NoError(t, json.Unmarshal([]byte(out), &results))
	assert.Equal(t, map[string]any{"a": float64(1)}, results[0].Result)

	// One device, followed live: plain lines, since the output is no
	// terminal, then the steps.
	plan := f.plan("task_name: twice\nsteps: [{tool: fixtures.echo, parameters: {n: 1}}, {tool: echo}]\n")
	out, errOut, code := f.ctl("dispatch", "kiosk-1", plan, "--wait")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `\] kiosk-1: step 1/2 fixtures\.echo\n`, out)
	assert.Regexp(t, `\] kiosk-1: step 2/2 echo success\n`, out)
	assert.Regexp(t, `\] kiosk-1: completed in \d+\.\ds\n`, out)
	assert.Regexp(t, `(?m)^2\s+echo\s+success\s+1\s*$`, out)
	assert.Regexp(t, `(?m)^plan \S+ \(twice\) on kiosk-1: completed, took \d+\.\ds$`, out)

	// A fleet by label: each matching device, live, then each outcome.
	out, errOut, code = f.ctl("dispatch", "--label", "site=lobby", plan, "--wait", "--concurrency", "1")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "on 2 device(s)")
	for _, id := range []string{"kiosk-1", "kiosk-2"} {
		assert.Regexp(t, `\] `+id+`: started\n`, out)
		assert.Regexp(t, `\] `+id+`: step 2/2 echo success\n`, out)
		assert.Regexp(t, `(?m)^`+id+`\s+completed\s+\S{36}\s*$`, out)
	}
	assert.NotContains(t, out, "cafe-1")
	assert.Regexp(t, `(?m)^fleet \S+ \(twice\): completed`, out)

	// A plan the device cannot run whole is refused before anything runs:
	// exit 2, each problem on a line of its own.
	unknown := f.plan("steps: [{tool: fixtures.nope}, {tool: echo, parameters: {n: 1}}, {tool: ech0}]\n")
	out, errOut, code = f.ctl("dispatch", "kiosk-1", unknown, "--wait")
	assert.Equal(t, exitUsage, code, out)
	assert.Contains(t, errOut, "server answered 400: refused:\n"+
		`  steps[0].tool: device "kiosk-1" has no tool "fixtures.nope"`+"\n"+
		`  steps[2].tool: device "kiosk-1" has no tool "ech0"; did you mean echo?`)

	// A plan that fails: exit 1, and the summary says where.
	failing := f.plan("steps: [{tool: echo}, {tool: fail}, {tool: echo}]\n")
	out, _, code = f.ctl("dispatch", "--label", "site=lobby", failing, "--wait")
	assert.Equal(t, exitFailed, code)
	assert.Regexp(t, `(?m)^kiosk-2\s+failed\s+\S{36}\s+step 2 \(fail\) failed: `, out, "steps count from 1")
	assert.Regexp(t, `(?m)^fleet \S{36} \(\S{36}\): failed, took \S+: 2 of 2 devices failed$`, out, "a task without a name gets its own")

	// Without --wait, the id; task ID --wait follows it up.
	out, _, code = f.ctl("-o", "json", "dispatch", "cafe-1", plan)
	require.Equal(t, exitOK, code)
	var d api.DispatchResponse
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	out, _, code = f.ctl("-o", "json", "task", d.SessionID, "--wait")
	require.Equal(t, exitOK, code)
	var task api.Task
	require.NoError(t, json.Unmarshal([]byte(out), &task))
	assert.Equal(t, api.StateCompleted, task.State)
	assert.Len(t, task.Commands, 2)

	out, _, code = f.ctl("task", d.SessionID)
	require.Equal(t, exitOK, code)
	assert.Regexp(t, `(?m)^device\s+cafe-1$`, out)
	assert.Regexp(t, `(?m)^state\s+completed$`, out)
	assert.Regexp(t, `(?m)^1\s+fixtures\.echo\s+success\s+1\s*$`, out)

	out, _, code = f.ctl("tasks", "--state", "failed")
	require.Equal(t, exitOK, code)
	assert.Regexp(t, `(?m)^\S{36}\s+\S{36}\s+fleet\s+\(fleet\)\s+failed\s`, out)
	assert.NotContains(t, out, "completed")

	// Cancel a task that runs.
	spin := f.plan("steps: [{tool: spin, timeout: 20s}]\n")
	out, _, code = f.ctl("-o", "json", "dispatch", "kiosk-2", spin)
	require.Equal(t, exitOK, code)
	require.NoError(t, json.Unmarshal([]byte(out), &d))
	// Ctrl-C while following it: exit 130, and the task goes on.
	ctx, interrupt := context.WithCancel(t.Context())
	errOut, code = ctlContext(ctx, writerFunc(func(p []byte) (int, error) { interrupt(); return len(p), nil }),
		append(slices.Clone(f.flags), "task", d.SessionID, "--wait")...)
	assert.Equal(t, exitInterrupted, code, errOut)
	assert.Equal(t, "stopped waiting; the task goes on: aipctl task "+d.SessionID+" --wait", errOut)
	out, _, code = f.ctl("cancel", d.SessionID)
	require.Equal(t, exitOK, code)
	assert.Equal(t, "task "+d.SessionID+" cancelled\n", out)
	_, errOut, code = f.ctl("cancel", d.SessionID)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "is not running: it is cancelled")

	out, _, code = f.ctl("device", "enroll", "kiosk-9", "--label", "site=attic")
	require.Equal(t, exitOK, code)
	assert.True(t, strings.HasPrefix(out, "aipd_"))
	out, _, code = f.ctl("device", "revoke", "kiosk-9")
	require.Equal(t, exitOK, code)
	assert.Equal(t, "revoked kiosk-9\n", out)
	_, errOut, code = f.ctl("device", "revoke", "kiosk-9")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `device "kiosk-9" is not enrolled`)
}

func TestExitCodes(t *testing.T) {
	f := newFleet(t, nil)
	plan := f.plan("steps: [{tool: echo}]\n")
	_, err := f.api.Enroll(t.Context(), api.EnrollRequest{ID: "kiosk-off"}) // and never connects
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"unknown command", []string{"nope"}, exitUsage},
		{"dispatch needs a target", []string{"dispatch", plan}, exitUsage},
		{"a bad label", []string{"dispatch", "--label", "site", plan}, exitUsage},
		{"no such plan file", []string{"dispatch", "kiosk-1", "/nonexistent.yaml"}, exitUsage},
		{"no device has the label", []string{"dispatch", "--label", "site=moon", plan}, exitUsage},
		{"a device that is not enrolled", []string{"dispatch", "kiosk-1", plan}, exitUsage},
		{"a device that is offline", []string{"dispatch", "kiosk-off", plan}, exitUsage},
		{"a bad state", []string{"tasks", "--state", "sleepy"}, exitUsage},
		{"a bad output format", []string{"devices", "-o", "yaml"}, exitUsage},
		{"no such task", []string{"task", "nope"}, exitUsage},
	} {
		_, errOut, code := f.ctl(c.args...)
		assert.Equal(t, c.code, code, "%s: %s", c.name, errOut)
	}

	// A command is sent even so, and fails like a tool would: exit 1.
	out, _, code := f.ctl("exec", "kiosk-off", "echo")
	assert.Equal(t, exitFailed, code, "exec on a device that is offline")
	assert.Contains(t, out, `device \"kiosk-off\" is offline`)

	_, _, code = ctl(t, "--server", "http://127.0.0.1:1", "--token-file", filepath.Join(t.TempDir(), "x"), "devices")
	assert.Equal(t, exitUsage, code, "an unreadable token file")
	bad := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(bad, []byte("aipo_wrong"), 0o600))
	_, errOut, code := ctl(t, "--server", "http://127.0.0.1:1", "--token-file", bad, "devices")
	assert.Equal(t, exitUnreachable, code, "server unreachable: %s", errOut)
	_, errOut, code = ctl(t, "--server", f.api.BaseURL, "--token-file", bad, "devices")
	assert.Equal(t, exitUnreachable, code, "authentication failed: %s", errOut)
}

// jsonCommands run every command asking for JSON, -o json; the test
// checks that none is missing.
func jsonCommands(t *testing.T, f *fleet) map[string][]string {
	dir := t.TempDir()
	key, mod := filepath.Join(dir, "k"), filepath.Join(dir, "t.wasm")
	return map[string][]string{
		"devices":            {"-o", "json", "devices"},
		"device enroll":      {"-o", "json", "device", "enroll", "kiosk-7"},
		"device revoke":      {"-o", "json", "device", "revoke", "kiosk-7"},
		"device rotate":      {"-o", "json", "device", "rotate", "kiosk-1"},
		"device certificate": {"-o", "json", "device", "certificate", "kiosk-1", "--csr", f.csr()},
		"tools":              {"-o", "json", "tools", "kiosk-1"},
		"exec":               {"-o", "json", "exec", "kiosk-1", "echo"},
		"dispatch":           {"-o", "json", "dispatch", "kiosk-1", f.plan("steps: [{tool: echo}]\n"), "--wait"},
		"plan validate":      {"-o", "json", "plan", "validate", f.plan("steps: [{tool: echo}]\n"), "--device", "kiosk-1"},
		"tasks":              {"-o", "json", "tasks"},
		"task":               {"-o", "json", "task", "LAST"},
		"cancel":             {"-o", "json", "cancel", "SPIN"},
		"tool init":          {"-o", "json", "tool", "init", "newtool", "--dir", filepath.Join(dir, "newtool")},
		"tool keygen":        {"-o", "json", "tool", "keygen", "--out", key},
		"agent publish":      {"-o", "json", "agent", "publish", goBuild(t, "arm64", "1.0.0"), "--version", "1.0.0", "--key", key + ".key"},
		"agent releases":     {"-o", "json", "agent", "releases"},
		"tool pack":          {"-o", "json", "tool", "pack", fixturePath("echo.wasm"), "--manifest", fixturePath("echo.json"), "--out", mod},
		"tool sign":          {"-o", "json", "tool", "sign", "--key", key + ".key", mod},
		"tool verify":        {"-o", "json", "tool", "verify", "--pub", key + ".pub", mod},
		"tool inspect":       {"-o", "json", "tool", "inspect", mod},
		"tool run":           {"-o", "json", "tool", "run", "--cache=", mod, "a=1"},
		"tool deploy":        {"-o", "json", "tool", "deploy", "kiosk-1", filepath.Join(testenv.SignedTools(), "unsigned_echo.wasm")},
		"operator add":       {"-o", "json", "operator", "add", "ci", "--role", "viewer"},
		"operator list":      {"-o", "json", "operator", "list"},
		"operator rotate":    {"-o", "json", "operator", "rotate", "ci"},
		"operator revoke":    {"-o", "json", "operator", "revoke", "ci"},
		"audit":              {"-o", "json", "audit"},
		"device label":       {"-o", "json", "device", "label", "kiosk-1", "role=kiosk"},
		"rollout apply":      {"-o", "json", "rollout", "apply", f.file("rollout.yaml", "name: r\nselector: site=nowhere\ntools: ["+filepath.Join(testenv.SignedTools(), "signed_echo.wasm")+"]\n")},
		"rollout status":     {"-o", "json", "rollout", "status", "r"},
		"rollout list":       {"-o", "json", "rollout", "list"},
		"rollout history":    {"-o", "json", "rollout", "history", "r"},
		"rollout pause":      {"-o", "json", "rollout", "pause", "r"},
		"rollout resume":     {"-o", "json", "rollout", "resume", "r"},
		"rollout rollback":   {"-o", "json", "rollout", "rollback", "r"},
		"version":            {"-o", "json", "version"},
	}
}

func TestEveryCommandSpeaksJSON(t *testing.T) {
	f := newFleet(t, map[string]map[string]string{"kiosk-1": lobby}, overTLS(t))
	cmds := jsonCommands(t, f)

	var leaves []string
	var walk func(c *cobra.Command, prefix string)
	walk = func(c *cobra.Command, prefix string) {
		for _, sub := range c.Commands() {
			name := strings.TrimSpace(prefix + " " + sub.Name())
			if sub.HasSubCommands() {
				walk(sub, name)
			} else {
				leaves = append(leaves, name)
			}
		}
	}
	walk(newRoot(), "")
	for _, leaf := range leaves {
		assert.Contains(t, cmds, leaf, "aipctl %s: not checked for -o json", leaf)
	}

	spin := f.plan("steps: [{tool: spin, timeout: 20s}]\n")
	var d api.DispatchResponse
	out, _, code := f.ctl("-o", "json", "dispatch", "kiosk-1", spin)
	require.Equal(t, exitOK, code)
	require.NoError(t, json.Unmarshal([]byte(out), &d))

	// In order: enroll before revoke, keygen and pack before sign, add
	// before rotate and revoke.
	order := []string{"devices", "device enroll", "device revoke", "device rotate", "device certificate", "tools", "exec", "cancel", "dispatch", "plan validate", "tasks", "task",
		"tool init", "tool keygen", "agent publish", "agent releases", "tool pack", "tool sign", "tool verify", "tool inspect", "tool run", "tool deploy",
		"operator add", "operator list", "operator rotate", "operator revoke", "audit", "device label",
		"rollout apply", "rollout status", "rollout list", "rollout history", "rollout pause", "rollout resume", "rollout rollback", "version"}
	require.ElementsMatch(t, order, keys(cmds))
	var last string
	for _, name := range order {
		args := cmds[name]
		for i, a := range args {
			args[i] = strings.NewReplacer("LAST", last, "SPIN", d.SessionID).Replace(a)
		}
		out, errOut, code := f.ctl(args...)
		if name == "tool deploy" {
			assert.Equal(t, exitFailed, code, "an agent without trusted keys refuses deploys")
		} else {
			require.Equal(t, exitOK, code, "%s: %s", name, errOut)
		}
		var v any
		require.NoError(t, json.Unmarshal([]byte(out), &v), "aipctl %s printed %q", strings.Join(args, " "), out)
		if m, ok := v.(map[string]any); ok && name == "dispatch" {
			last, _ = m["session_id"].(string)
		}
	}
}

// writerFunc is an io.Writer that calls itself.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func keys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestProgressOnATerminalRedrawsALinePerDevice(t *testing.T) {
	var buf strings.Builder
	p := newProgress(&buf, func() (int, int) { return 120, 24 }, []string{"kiosk-1", "kiosk-22"})
	zero, one := 0, 1
	p.event(api.TaskEvent{Type: api.EventDeviceStart, DeviceID: "kiosk-1", Steps: 2})
	p.event(api.TaskEvent{Type: api.EventStepStart, DeviceID: "kiosk-1", Steps: 2, Step: &zero, Tool: "hash_file", Attempt: 1})
	p.event(api.TaskEvent{Type: api.EventStepStart, DeviceID: "kiosk-1", Steps: 2, Step: &one, Tool: "read_file", Attempt: 2})
	p.event(api.TaskEvent{Type: api.EventDeviceEnd, DeviceID: "kiosk-1", State: api.StateFailed, Error: "step 1 (read_file) failed: denied"})

	frames := strings.Split(buf.String(), "\x1b[2A")
	require.Len(t, frames, 4, "the first frame draws two lines; each later one goes back up over them")
	line := regexp.MustCompile(`\r\x1b\[2K([^\n]*)\n`)
	last := line.FindAllStringSubmatch(frames[3], -1)
	require.Len(t, last, 2)
	assert.Regexp(t, `^kiosk-1   failed     step 2/2 read_file \(attempt 2\)  \d+\.\ds  step 1 \(read_file\) failed: denied$`, last[0][1])
	assert.Equal(t, "kiosk-22  pending", last[1][1])
	second := line.FindAllStringSubmatch(frames[1], -1)
	assert.Regexp(t, `^kiosk-1   running    step 1/2 hash_file  \d+\.\ds$`, second[0][1])
}

func TestProgressFallsBackToLinesWhenDevicesOutnumberTheRows(t *testing.T) {
	var buf strings.Builder
	rows := 4
	p := newProgress(&buf, func() (int, int) { return 80, rows }, []string{"kiosk-1", "kiosk-2", "kiosk-3"})
	p.event(api.TaskEvent{Type: api.EventDeviceStart, DeviceID: "kiosk-1", Steps: 2})
	require.Contains(t, buf.String(), "\x1b[2K", "three lines and the cursor fit in four rows")

	rows = 3 // the terminal shrank: going up three lines would leave the screen
	buf.Reset()
	p.event(api.TaskEvent{Type: api.EventDeviceStart, DeviceID: "kiosk-2", Steps: 2})
	p.event(api.TaskEvent{Type: api.EventDeviceEnd, DeviceID: "kiosk-2", State: api.StateCompleted})
	p.tick(t.Context()) // returns at its first tick: nothing to redraw any more
	out := buf.String()
	assert.NotContains(t, out, "\x1b[", "no cursor movement once the lines do not fit")
	assert.Regexp(t, `^3 devices do not fit in 3 rows: one line per event from here on\n`, out)
	assert.Regexp(t, `\] kiosk-2: started\n`, out)
	assert.Regexp(t, `\] kiosk-2: completed in \d+\.\ds\n`, out)
}

func TestAStepThatFailsBeforeItStartsShowsItsStepAndTool(t *testing.T) {
	zero := 0
	failed := api.TaskEvent{Type: api.EventStepEnd, DeviceID: "k1", Step: &zero, Tool: "nosuchtool", Attempt: 1,
		Status: "failure", Error: `device "k1" has no tool "nosuchtool"`}
	var buf strings.Builder
	newProgress(&buf, nil, []string{"k1"}).event(failed)
	assert.Regexp(t, `\] k1: step 1 nosuchtool failure: device "k1" has no tool "nosuchtool"\n$`, buf.String(),
		"a server that does not say how many steps")

	failed.Steps = 2
	buf.Reset()
	newProgress(&buf, nil, []string{"k1"}).event(failed)
	assert.Regexp(t, `\] k1: step 1/2 nosuchtool failure: `, buf.String())

	buf.Reset()
	newProgress(&buf, func() (int, int) { return 80, 24 }, []string{"k1"}).event(failed)
	assert.Regexp(t, `k1  running    step 1/2 nosuchtool  \d+\.\ds\n$`, buf.String())
}

func TestTruncateCutsWholeCharacters(t *testing.T) {
	s := truncate(strings.Repeat("é", 100)+"\nnext", 80)
	assert.True(t, utf8.ValidString(s), "%q", s)
	assert.Equal(t, 80, utf8.RuneCountInString(s))
	assert.True(t, strings.HasSuffix(s, "é…"))
	assert.Equal(t, "a b c d", truncate("a\nb\rc\x1bd", 80), "nothing that moves the cursor")
}

// On an 80-column terminal, a device line with a long error must still
// take one row: else going up one row per device lands short, and each
// redraw leaves a stale copy of the wrapped rows behind.
func TestProgressLinesFitTheTerminalsWidth(t *testing.T) {
	var buf strings.Builder
	p := newProgress(&buf, func() (int, int) { return 80, 24 }, []string{"kiosk-1", "kiosk-2"})
	p.event(api.TaskEvent{Type: api.EventDeviceStart, DeviceID: "kiosk-1", Steps: 1})
	p.event(api.TaskEvent{Type: api.EventDeviceEnd, DeviceID: "kiosk-1", State: api.StateFailed,
		Error: strings.Repeat("step 1 (hash_file) failed: open /data/kiosk/a/very/long/path: denied; ", 5) + "\r\nand more"})
	p.event(api.TaskEvent{Type: api.EventDeviceStart, DeviceID: "kiosk-2", Steps: 1})
	p.redraw()

	up := regexp.MustCompile(`\x1b\[(\d+)A`)
	frames := up.Split(buf.String(), -1)
	ups := up.FindAllStringSubmatch(buf.String(), -1)
	require.Len(t, frames, 4, "a frame per event, and one more")
	for i, frame := range frames {
		lines := strings.SplitAfter(frame, "\n")
		require.Equal(t, "", lines[len(lines)-1], "frame %d ends its last line", i)
		lines = lines[:len(lines)-1]
		for _, l := range lines {
			text, ok := strings.CutPrefix(strings.TrimSuffix(l, "\n"), "\r\x1b[2K")
			require.True(t, ok, "frame %d: each line clears its row first: %q", i, l)
			assert.NotContains(t, text, "\x1b", "frame %d", i)
			assert.NotContains(t, text, "\r", "frame %d", i)
			assert.LessOrEqual(t, utf8.RuneCountInString(text), 79, "frame %d: %q", i, text)
		}
		if i > 0 {
			assert.Equal(t, strconv.Itoa(len(strings.SplitAfter(frames[i-1], "\n"))-1), ups[i-1][1],
				"frame %d goes up over as many rows as frame %d printed", i, i-1)
		}
	}
	assert.Contains(t, frames[3], "kiosk-1  failed     ", "the error line is cut, not dropped")
	assert.True(t, strings.HasSuffix(strings.Split(frames[3], "\n")[0], "…"), "%q", frames[3])
}

func TestExecCompletesDevicesThenTheirTools(t *testing.T) {
	f := newFleet(t, map[string]map[string]string{"kiosk-1": lobby})
	complete := func(args ...string) []string {
		t.Helper()
		out, errOut, code := ctl(t, append(append([]string{"__complete", "exec"}, f.flags...), args...)...)
		require.Equal(t, exitOK, code, errOut)
		return strings.Split(strings.TrimSpace(out), "\n")
	}
	assert.Equal(t, []string{"kiosk-1\tonline", ":4"}, complete(""), "devices, and no files")
	tools := complete("kiosk-1", "")
	assert.Contains(t, tools, "echo\tfixtures action")
	assert.Contains(t, tools, "spin\tfixtures action")
	assert.Equal(t, ":4", tools[len(tools)-1])
	assert.Equal(t, []string{":4"}, complete("kiosk-1", "echo", ""), "no files for KEY=VALUE either")
}

// While the device prepares the step's tool, the device's line says so,
// and no more once the tool is ready; in plain lines, each word is a line.
func TestProgressSaysWhileTheDevicePreparesTheTool(t *testing.T) {
	zero := 0
	start := api.TaskEvent{Type: api.EventStepStart, DeviceID: "kiosk-1", Steps: 1, Step: &zero, Tool: "hash_file", Attempt: 1}
	preparing := start
	preparing.Type, preparing.Preparing = api.EventPreparing, &protocol.Preparing{ToolName: "hash_file", Stage: "initializing", Step: 2, Steps: 3}
	ready := preparing
	ready.Preparing = &protocol.Preparing{ToolName: "hash_file", Stage: protocol.PreparingReady, Step: 3, Steps: 3}

	var buf strings.Builder
	p := newProgress(&buf, func() (int, int) { return 120, 24 }, []string{"kiosk-1"})
	p.event(start)
	p.event(preparing)
	assert.Regexp(t, `kiosk-1  running    step 1/1 hash_file: preparing hash_file \(initializing, step 2/3\)  \d+\.\ds\n$`, buf.String())
	p.event(ready)
	assert.Regexp(t, `kiosk-1  running    step 1/1 hash_file  \d+\.\ds\n$`, buf.String())

	buf.Reset()
	p = newProgress(&buf, nil, []string{"kiosk-1"})
	p.event(start)
	p.event(preparing)
	assert.Regexp(t, `\] kiosk-1: step 1/1 hash_file: preparing hash_file \(initializing, step 2/3\)\n$`, buf.String())
}

// Item 6 of issue 43: the README's table of exit codes is what aipctl
// does: a case of each row, and no code the table lacks.
func TestEveryExitCodeOfTheTable(t *testing.T) {
	f := newFleet(t, map[string]map[string]string{"kiosk-1": lobby})
	viewer, errOut, code := f.ctl("operator", "add", "watcher", "--role", "viewer")
	require.Equal(t, exitOK, code, errOut)
	wrong := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(wrong, []byte("aipo_wrong"), 0o600))
	withWrongToken := []string{"--server", f.api.BaseURL, "--token-file", wrong}

	codes := map[int][]string{}
	check := func(want int, name string, got int, errOut string) {
		t.Helper()
		assert.Equal(t, want, got, "%s: %s", name, errOut)
		codes[want] = append(codes[want], name)
	}
	_, errOut, code = f.ctl("devices")
	check(exitOK, "a command that works", code, errOut)
	_, errOut, code = f.ctl("exec", "kiosk-1", "fail")
	check(exitFailed, "a tool that fails", code, errOut)
	_, errOut, code = f.ctl("nope")
	check(exitUsage, "an unknown command", code, errOut)
	_, errOut, code = f.ctl("exec", "kiosk-9", "echo")
	check(exitUsage, "an unknown device (404)", code, errOut)
	_, errOut, code = ctl(t, "--server", "http://127.0.0.1:1", "--token-file", wrong, "devices")
	check(exitUnreachable, "a server unreachable", code, errOut)
	_, errOut, code = f.as(strings.TrimSpace(viewer), "exec", "kiosk-1", "echo")
	check(exitUnreachable, "a role that does not allow it (403)", code, errOut)
	_, errOut, code = ctl(t, append(withWrongToken, "devices")...)
	check(exitUnreachable, "a wrong token (401)", code, errOut)
	spin := f.plan("steps: [{tool: spin, timeout: 20s}]\n")
	id, errOut, code := f.ctl("dispatch", "kiosk-1", spin)
	require.Equal(t, exitOK, code, errOut)
	ctx, interrupt := context.WithCancel(t.Context())
	errOut, code = ctlContext(ctx, writerFunc(func(p []byte) (int, error) { interrupt(); return len(p), nil }),
		append(slices.Clone(f.flags), "task", strings.TrimSpace(id), "--wait")...)
	check(exitInterrupted, "Ctrl-C", code, errOut)

	// Last, since it refuses the admin's token too: guesses from one
	// address, each another token, until the server refuses it for a
	// while.
	for i := 0; i < 30 && !strings.Contains(errOut, "429"); i++ {
		_, errOut, code = f.as(fmt.Sprintf("aipo_guess_%d", i), "devices")
	}
	require.Contains(t, errOut, "too many failed authentications from this address")
	check(exitUnreachable, "too many failed authentications (429)", code, errOut)

	readme, err := os.ReadFile(filepath.Join(testenv.Root(), "README.md"))
	require.NoError(t, err)
	var table []int
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \| `).FindAllStringSubmatch(string(readme), -1) {
		n, _ := strconv.Atoi(m[1])
		table = append(table, n)
	}
	assert.ElementsMatch(t, table, slices.Sorted(maps.Keys(codes)), "the README's table and the codes aipctl exits with")
}
