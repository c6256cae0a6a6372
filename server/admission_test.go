package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/servertest"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nested is {"a": {"a": ... {"a": 1}}}: depth maps, one in another.
func nested(depth int) map[string]any {
	m := map[string]any{"a": 1}
	for range depth - 1 {
		m = map[string]any{"a": m}
	}
	return m
}

// nestedYAML is nested(depth) in YAML's flow style.
func nestedYAML(depth int) string {
	return strings.Repeat("{a: ", depth) + "1" + strings.Repeat("}", depth)
}

// refusal calls the API and requires a 400 with problems, which it
// returns as "path: problem" lines.
func (ts *testServer) refusal(method, path string, in any) []string {
	ts.t.Helper()
	err := ts.api.Do(context.Background(), method, path, in, nil)
	var se *api.StatusError
	require.ErrorAs(ts.t, err, &se, "refused")
	require.Equal(ts.t, http.StatusBadRequest, se.Code, se.Message)
	require.NotEmpty(ts.t, se.Problems, "the problems, one by one: %s", se.Message)
	lines := make([]string, len(se.Problems))
	for i, p := range se.Problems {
		lines[i] = p.Path + ": " + p.Problem
		assert.Contains(ts.t, se.Message, lines[i], "the message lists every problem")
	}
	return lines
}

// requireNothingRecorded requires that no task and no command was
// recorded, and that the devices were sent nothing.
func (ts *testServer) requireNothingRecorded(devs ...*rawClient) {
	ts.t.Helper()
	var page api.TaskPage
	require.NoError(ts.t, ts.api.Do(context.Background(), "GET", "/api/tasks", nil, &page))
	assert.Empty(ts.t, page.Tasks, "no task")
	var audit []api.AuditEntry
	require.NoError(ts.t, ts.api.Do(context.Background(), "GET", "/api/audit", nil, &audit))
	for _, e := range audit {
		assert.NotEmpty(ts.t, e.Action, "no command: the audit log records only changes (enrollments): %+v", e)
	}
	for _, d := range devs {
		d.ping()
	}
}

func TestParametersNestedTooDeepAreRefusedNamingPathAndDepthAndNothingIsRecorded(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1")
	problems := ts.refusal("POST", "/api/devices/kiosk-1/commands", api.CommandRequest{
		Actions: []protocol.Command{{ToolName: "echo", Parameters: nested(1000)}}, Timeout: "2s"})
	assert.Equal(t, []string{"actions[0].parameters.a.a.a.a.a.a.a.a…: nested 1000 levels deep; " +
		"a COMMAND frame has room for 29 (32 levels in all)"}, problems)
	ts.requireNothingRecorded(dev)
}

// The limit is the wire's: parameters as deep as a frame can carry reach
// the device and decode there; one level more is refused.
func TestParametersAsDeepAsTheWireAllowsReachTheDevice(t *testing.T) {
	ts := newTestServer(t)
	for _, enc := range []protocol.Encoding{protocol.CBOR, protocol.JSON} {
		id := "kiosk-" + enc.String()
		dev, err := ts.dialWire(ts.enroll(id), enc)
		require.NoError(t, err)
		dev.register(id)
		refused := ts.refusal("POST", "/api/devices/"+id+"/commands", api.CommandRequest{
			Actions: []protocol.Command{{ToolName: "echo", ToolType: protocol.ToolAction, Parameters: nested(tasks.MaxParamsDepth + 1)}}})
		assert.Len(t, refused, 1)

		done := make(chan api.CommandResponse, 1)
		go func() {
			resp, err := ts.api.Command(context.Background(), id, api.CommandRequest{
				Actions: []protocol.Command{{ToolName: "echo", ToolType: protocol.ToolAction, Parameters: nested(tasks.MaxParamsDepth)}}})
			assert.NoError(t, err)
			done <- resp
		}()
		cmd := dev.nextCommand()
		want, err := json.Marshal(nested(tasks.MaxParamsDepth))
		require.NoError(t, err)
		got, err := json.Marshal(cmd.Actions[0].Parameters)
		require.NoError(t, err)
		assert.JSONEq(t, string(want), string(got), "decoded whole on %s", enc)
		dev.answer(cmd, protocol.ResultSuccess, "")
		resp := <-done
		assert.True(t, resp.Succeeded(), resp.FirstError())
	}
}

// inventoryWithSchemas is a device's tools: hash_file takes a path, echo
// takes anything.
var inventoryWithSchemas = servertest.ToolsWithSchemas

func TestAPlansProblemsAreListedAllAtOnceBeforeAnythingRuns(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", inventoryWithSchemas()...)
	planDoc := fmt.Sprintf(`
steps:
  - tool: stock.echo
    parameters: {msg: "this one is fine, and must not run before the others are checked"}
  - tool: echo
    parameters: %s
  - tool: hash_fiel
  - actions:
      - {tool: echo}
      - {tool: stock.hash_file, parameters: {path: 5, mode: x}}
  - tool: stock.nope
`, nestedYAML(31))
	problems := ts.refusal("POST", "/api/dispatch", api.DispatchRequest{ClientID: "kiosk-1", Request: planDoc})
	assert.Equal(t, []string{
		"steps[1].parameters.a.a.a.a.a.a.a.a…: nested 31 levels deep; a COMMAND frame has room for 29 (32 levels in all)",
		`steps[2].tool: device "kiosk-1" has no tool "hash_fiel"; did you mean hash_file?`,
		`steps[3].actions[1].parameters.mode: not allowed (additionalProperties is false), says the input schema of "stock.hash_file" on device "kiosk-1"`,
		`steps[3].actions[1].parameters.path: got number, want string, says the input schema of "stock.hash_file" on device "kiosk-1"`,
		`steps[4].tool: device "kiosk-1" has no tool "stock.nope"`,
	}, problems)
	ts.requireNothingRecorded(dev)

	// The same checks hold for a single command.
	problems = ts.refusal("POST", "/api/devices/kiosk-1/commands", api.CommandRequest{
		Actions: []protocol.Command{{ToolName: "echo"}, {ToolName: "hash_file", Parameters: map[string]any{}}}})
	assert.Equal(t, []string{`actions[1].parameters.path: missing (required), says the input schema of "hash_file" on device "kiosk-1"`}, problems)
	ts.requireNothingRecorded(dev)
}

func TestAnOfflineDeviceIsCheckedAgainstItsLastRegistrationSayingSo(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", inventoryWithSchemas()...)
	dev.conn.CloseNow()
	ts.waitOffline()
	problems := ts.refusal("POST", "/api/devices/kiosk-1/commands", api.CommandRequest{
		Actions: []protocol.Command{{ToolName: "hash_fiel"}, {ToolName: "hash_file"}}})
	assert.Equal(t, []string{
		`actions[0].tool_name: device "kiosk-1" is offline, and its last registration listed no tool "hash_fiel"; did you mean hash_file?`,
		`actions[1].parameters.path: missing (required), says the input schema of "hash_file" on device "kiosk-1" (offline: as it last registered)`,
	}, problems)
	ts.requireNothingRecorded()
}

// A device that lists no tools (UFO's device client lists none) checks
// its commands itself: the server has nothing to check them against.
func TestADeviceThatListsNoToolsGetsItsCommandsUnchecked(t *testing.T) {
	ts := newTestServer(t)
	ts.device("kiosk-1").serveOK()
	resp, err := ts.api.Command(context.Background(), "kiosk-1", api.CommandRequest{
		Actions: []protocol.Command{{ToolName: "anything", Parameters: map[string]any{"at": "all"}}}})
	require.NoError(t, err)
	assert.True(t, resp.Succeeded(), resp.FirstError())
}

// A UFO device needs a tool_type the server can fill in only from the
// device's inventory; admission resolves calls as the send does, so such a
// command is refused up front.
func TestAUFOCommandWithoutAToolTypeTheServerCannotFillInIsRefused(t *testing.T) {
	ts := newTestServer(t)
	ufo, err := ts.dialWire(ts.enroll("ufo-1"), protocol.JSON)
	require.NoError(t, err)
	ufo.register("ufo-1")
	problems := ts.refusal("POST", "/api/devices/ufo-1/commands", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
	assert.Equal(t, []string{`actions[0].tool_name: device "ufo-1" speaks UFO's JSON and does not list "echo": give its tool_type (data_collection or action)`}, problems)
	ts.requireNothingRecorded(ufo)
}

func TestAFleetsPlanIsCheckedAgainstEachDevicesInventory(t *testing.T) {
	ts := newTestServer(t)
	full := ts.labelled("lobby-1", lobby)
	resp, err := ts.api.Enroll(context.Background(), api.EnrollRequest{ID: "lobby-2", Labels: lobby})
	require.NoError(t, err)
	old := ts.mustDial(resp.Token)
	old.register("lobby-2", tool("stock", "hash_file", protocol.ToolDataCollection))

	problems := ts.refusal("POST", "/api/fleets", api.FleetRequest{Labels: lobby, Plan: json.RawMessage(`"steps: [{tool: stock.echo}]"`)})
	assert.Equal(t, []string{`steps[0].tool: device "lobby-2" has no tool "stock.echo"`}, problems)
	ts.requireNothingRecorded(full, old)
}

func TestAConstellationsTaskIsRefusedWithItsProblems(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", inventoryWithSchemas()...)
	con := ts.constellation("orch-1", "kiosk-1")
	m := con.task("s1", "", `steps: [{tool: stock.echo}, {tool: stock.hash_file}]`)
	require.Equal(t, protocol.ServerTaskEnd, m.Type, "a TASK that cannot start ends at once (UFO's client waits for its TASK_END): %+v", m)
	assert.Equal(t, protocol.StatusFailed, m.Status)
	assert.Equal(t, "s1", m.SessionID)
	assert.Equal(t, `task: refused: steps[1].parameters.path: missing (required), says the input schema of "stock.hash_file" on device "kiosk-1"`, m.Error)
	ts.requireNothingRecorded(dev)
}

// A plan may install a tool and use it: the steps after an install_tool
// step are resolved and checked when they are sent, against the
// inventory the device has registered by then.
func TestAToolThePlanInstallsIsCheckedWhenItIsUsed(t *testing.T) {
	ts := newTestServer(t)
	install := tool("", protocol.InstallToolName, protocol.ToolAction)
	install.InputSchema = protocol.InstallToolSchema
	dev := ts.device("kiosk-1", install, tool("stock", "echo", protocol.ToolAction))
	d := dispatchPlan(t, ts, "kiosk-1", `
steps:
  - tool: install_tool
    parameters: {module: AAAA, sha256: abc, namespace: deployed}
  - tool: deployed.fresh
    parameters: {any: thing}
`)
	first := dev.nextCommand()
	dev.register("kiosk-1", install, tool("deployed", "fresh", protocol.ToolAction)) // as the agent does once it installed the tool
	dev.answer(first, protocol.ResultSuccess, "")
	second := dev.nextCommand()
	assert.Equal(t, "fresh", second.Actions[0].ToolName)
	assert.Equal(t, protocol.ToolAction, second.Actions[0].ToolType, "resolved against the new inventory")
	dev.answer(second, protocol.ResultSuccess, "")
	task := ts.waitTask(d.SessionID)
	assert.Equal(t, api.StateCompleted, task.State, task.Error)

	// The install step itself, and the steps before it, are checked.
	problems := ts.refusal("POST", "/api/dispatch", api.DispatchRequest{ClientID: "kiosk-1",
		Request: `steps: [{tool: ech0}, {tool: install_tool, parameters: {module: AAAA}}, {tool: deployed.fresh}]`})
	assert.Equal(t, []string{
		`steps[0].tool: device "kiosk-1" has no tool "ech0"`,
		`steps[1].parameters.sha256: missing (required), says the input schema of "install_tool" on device "kiosk-1"`,
	}, problems)
}

// aliasBomb is a plan of about 300 KB whose aliases expand it a
// hundredfold, within yaml.v3's own "excessive aliasing" limit.
func aliasBomb() string {
	return "steps:\n  - tool: echo\n    parameters:\n      a: &x \"" + strings.Repeat("x", 300_000) + "\"\n      b: [" +
		strings.TrimSuffix(strings.Repeat("*x, ", 100), ", ") + "]\n"
}

func TestAPlanThatExpandsPastTheLimitIsRefusedWithBothFigures(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1")
	problems := ts.refusal("POST", "/api/dispatch", api.DispatchRequest{ClientID: "kiosk-1", Request: aliasBomb()})
	require.Len(t, problems, 1)
	assert.Regexp(t, `^plan: at least \d{8} bytes as JSON once its YAML aliases are expanded, more than the limit of 1048576$`, problems[0])
	ts.requireNothingRecorded(dev)

	// A plan that passes the first measure, a lower bound taken on its
	// YAML (a true is at least a byte), is measured again as JSON, exactly.
	small := newTestServer(t, func(c *Config) { c.Limits.MaxPlanBytes = 300 })
	small.device("kiosk-1")
	doc := `steps: [{tool: echo, parameters: {flags: [` + strings.TrimSuffix(strings.Repeat("true, ", 100), ", ") + `]}}]`
	problems = small.refusal("POST", "/api/dispatch", api.DispatchRequest{ClientID: "kiosk-1", Request: doc})
	assert.Equal(t, []string{"plan: 552 bytes as JSON once its YAML aliases are expanded, more than the limit of 300"}, problems)
}

func TestOneCommandsParametersAreBoundedByTheLimitWithBothFigures(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Limits.MaxParamBytes = 1000 })
	dev := ts.device("kiosk-1")
	problems := ts.refusal("POST", "/api/devices/kiosk-1/commands", api.CommandRequest{Actions: []protocol.Command{
		{ToolName: "echo", Parameters: map[string]any{"msg": strings.Repeat("z", 600)}},
		{ToolName: "echo", Parameters: map[string]any{"msg": strings.Repeat("z", 600)}},
	}})
	assert.Equal(t, []string{"actions: parameters of 1220 bytes as JSON, more than the 1000 one command may carry"}, problems)
	problems = ts.refusal("POST", "/api/dispatch", api.DispatchRequest{ClientID: "kiosk-1",
		Request: `steps: [{tool: echo}, {tool: echo, parameters: {msg: "` + strings.Repeat("z", 1000) + `"}}]`})
	assert.Equal(t, []string{"steps[1]: parameters of 1010 bytes as JSON, more than the 1000 one command may carry"}, problems)
	ts.requireNothingRecorded(dev)
}

func TestACommandTooBigForTheFrameCapIsRefusedWithBothSizes(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Conn.MaxFrameBytes = 4096; c.Limits.MaxParamBytes = 1 << 20 })
	dev := ts.device("kiosk-1")
	problems := ts.refusal("POST", "/api/devices/kiosk-1/commands", api.CommandRequest{Actions: []protocol.Command{
		{ToolName: "echo", Parameters: map[string]any{"msg": strings.Repeat("z", 5000)}}}})
	require.Len(t, problems, 1)
	assert.Regexp(t, `^actions: its COMMAND frame is 5\d{3} bytes in cbor, more than the frame cap of 4096$`, problems[0])
	ts.requireNothingRecorded(dev)
}

// Below admission, the dispatcher fails at once a command its link
// refuses as too big for a frame: waiting would end only in a timeout
// that blames the link.
func TestACommandTheLinkRefusesAsTooBigFailsAtOnceWithBothSizes(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Conn.MaxFrameBytes = 4096 })
	dev := ts.device("kiosk-1")
	resp, err := ts.srv.sessions.RunUnadmitted(context.Background(), operatorCommand("kiosk-1"),
		[]protocol.Command{{ToolName: "echo", Parameters: map[string]any{"msg": strings.Repeat("z", 5000)}}}, 10*time.Second)
	require.NoError(t, err)
	assert.Regexp(t, `^command not sent: its COMMAND frame is 5\d{3} bytes in cbor, more than the frame cap of 4096$`, resp.FirstError())
	dev.ping() // nothing was sent
}

// What admission cannot foresee: a device away when its command is
// admitted (measured in CBOR, our agent's wire) that comes back speaking
// JSON, in which the command is larger than a frame. It fails as it
// would be sent, at once.
func TestACommandTooBigForTheWireItsDeviceComesBackOnFailsAtOnce(t *testing.T) {
	ts := newTestServer(t, func(c *Config) { c.Conn.MaxFrameBytes = 64 << 10; c.Limits.MaxParamBytes = 1 << 20 })
	token := ts.enroll("kiosk-1")
	dev := ts.mustDial(token)
	dev.register("kiosk-1")
	dev.conn.CloseNow()
	ts.waitOffline()

	ctrl := strings.Repeat("\x01", 20_000) // a byte each in CBOR, six in JSON ("\u0001")
	done := make(chan api.CommandResponse, 1)
	go func() {
		resp, err := ts.api.Command(context.Background(), "kiosk-1", api.CommandRequest{
			Actions: []protocol.Command{{ToolName: "echo", ToolType: protocol.ToolAction, Parameters: map[string]any{"ctrl": ctrl}}}, Timeout: "1m"})
		assert.NoError(t, err)
		done <- resp
	}()
	ts.waitLog("device is offline; the command waits for it to register again")
	back, err := ts.dialWire(token, protocol.JSON)
	require.NoError(t, err)
	back.register("kiosk-1")
	resp := <-done
	assert.Regexp(t, `^command not sent: its COMMAND frame is 12\d{4} bytes in json, more than the frame cap of 65536$`, resp.FirstError())
	back.ping()
}
