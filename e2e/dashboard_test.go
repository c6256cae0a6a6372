package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/internal/version"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chromiumPath finds Debian's chromium (apt-get install -y chromium), or
// another Chrome, or skips the test, saying so.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH: apt-get install -y chromium (make deps does)")
	return ""
}

// screenshotDir is where the dashboard test keeps its screenshots:
// $TEST_OUTPUT_DIR when set, else the test's artifact directory (kept with
// go test -artifacts -outputdir DIR).
func screenshotDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("TEST_OUTPUT_DIR"); dir != "" {
		dir = filepath.Join(dir, t.Name())
		require.NoError(t, os.MkdirAll(dir, 0o755))
		return dir
	}
	return t.ArtifactDir()
}

// stepTimeout bounds one step of the dashboard test: a hang guard.
const stepTimeout = 30 * time.Second

// page drives the dashboard in a headless Chromium with a fresh profile,
// started with the flags that work as root here (TIPS.md), one step at a
// time. A step that fails leaves a screenshot and the page's text.
type page struct {
	t     *testing.T
	ctx   context.Context
	shots string
}

func newPage(t *testing.T) *page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	// The first run starts the browser, which lives as long as its
	// context: that one has no deadline, the steps have theirs.
	require.NoError(t, chromedp.Do(ctx))
	return &page{t: t, ctx: ctx, shots: screenshotDir(t)}
}

// do runs one step's actions.
func (p *page) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
		defer cancel()
		chromedp.Do(ctx, p.shot("failed-"+step))
		view, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#view")))
		p.t.Fatalf("%s: %v\nthe page says:\n%s", step, err, view)
	}
}

// shot saves a screenshot of the whole page as NAME.png.
func (p *page) shot(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		png, err := chromedp.FullScreenshot(100)(ctx, t)
		if err != nil {
			return err
		}
		path := filepath.Join(p.shots, name+".png")
		p.t.Logf("screenshot: %s", path)
		return os.WriteFile(path, png, 0o644)
	})
}

// text is the text of the element sel.
func (p *page) text(sel string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(p.t, err, sel)
	return s
}

// texts are the texts of the elements sel, in document order.
func (p *page) texts(sel string) []string {
	p.t.Helper()
	return eval[[]string](p, `[...document.querySelectorAll(`+jsString(sel)+`)].map((e) => e.textContent)`)
}

// selectOption picks the option of a <select> whose text starts with
// prefix, as a user would.
func selectOption(sel, prefix string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`(() => {
			const s = document.querySelector(`+jsString(sel)+`);
			const o = [...s.options].find((o) => o.text.startsWith(`+jsString(prefix)+`));
			s.value = o.value;
			s.dispatchEvent(new Event("change"));
			return true;
		})()`)(ctx, t)
		return err
	})
}

func jsString(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}

func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// eval is the value of the JavaScript expression expr on the page.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(p.t, err, expr)
	return v
}

// display is the computed CSS display of the element sel: "none" if it
// takes no room on the page.
func (p *page) display(sel string) string {
	p.t.Helper()
	return eval[string](p, `getComputedStyle(document.querySelector(`+jsString(sel)+`)).display`)
}

// withSignedEcho adds the fixture signed_echo, signed with the test key,
// which the agent trusts; the other tools may stay unsigned.
func withSignedEcho(t *testing.T) agentOption {
	dir := filepath.Join(t.TempDir(), "signed")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "signed_echo.wasm"), testenv.ReadSigned(t, "signed_echo"), 0o644))
	optional := false
	return func(c *agent.Config) {
		c.ToolDirs = append(c.ToolDirs, "signed="+dir)
		c.TrustedKeys, c.RequireSigned = []ed25519.PublicKey{testenv.TestKey(t)}, &optional
	}
}

func TestTheDashboardLogsInRunsAToolAndFollowsAPlan(t *testing.T) {
	p := newPage(t)
	c := newCluster(t)
	files := t.TempDir()
	content := []byte("kiosk config v2\n")
	require.NoError(t, os.WriteFile(filepath.Join(files, "config.txt"), content, 0o644))

	// Log in: the token goes in once; the cookie carries the login. No
	// device is enrolled yet.
	p.do("login page",
		chromedp.Navigate(c.http.URL+"/"),
		chromedp.WaitVisible(css("#login-token")),
		p.shot("1-login"),
	)
	// Logged out, the navigation and "Log out" are not shown: the hidden
	// attribute wins over nav's display: flex.
	assert.Equal(t, "none", p.display("#nav"), "the navigation is not displayed when logged out")
	assert.False(t, eval[bool](p, `document.getElementById("logout").checkVisibility()`), "no Log out when logged out")
	p.do("login",
		chromedp.SendKeys(css("#login-token"), c.api.Token),
		chromedp.Click(css("#login-submit")),
		chromedp.WaitVisible(css("#view p.muted")),
	)
	assert.Equal(t, "flex", p.display("#nav"), "logged in, the navigation shows")
	assert.True(t, eval[bool](p, `document.getElementById("logout").checkVisibility()`))

	// The open page shows a device enrolled after it, and then on the
	// device's page, that it comes online and when it was last seen.
	enrolled, err := c.api.Enroll(context.Background(), api.EnrollRequest{ID: "kiosk-1", Labels: map[string]string{"site": "lobby"}})
	require.NoError(t, err)
	tokenFile := filepath.Join(t.TempDir(), "kiosk-1.token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(enrolled.Token), 0o600))
	p.do("enrolled",
		chromedp.WaitVisible(css(`tr[data-device="kiosk-1"] td.state.offline`)),
		chromedp.Click(css(`tr[data-device="kiosk-1"] a`)),
		chromedp.WaitVisible(css("#device-state.offline")),
	)
	assert.Equal(t, "never", p.text("#device-last-seen"))
	c.startAgent("kiosk-1", tokenFile, withMounts(sandbox.Mount{HostPath: files, GuestPath: files}), withSignedEcho(t))
	p.do("online", chromedp.WaitVisible(css("#device-state.online")))
	assert.Regexp(t, `^\d+s ago$`, p.text("#device-last-seen"))

	// The device is online in the list.
	p.do("devices",
		chromedp.Click(css(`nav a[href="#/devices"]`)),
		chromedp.WaitVisible(css(`tr[data-device="kiosk-1"] td.state.online`)),
		p.shot("2-devices"),
	)
	assert.Equal(t, "online", p.text(`tr[data-device="kiosk-1"] td.state`))
	assert.Equal(t, version.Version(), p.text(`tr[data-device="kiosk-1"] td.agent`), "the agent's version, as it registered")

	// The device's page: its tools with who signed them, and a form that
	// opens on a tool of its own, not on a meta tool.
	p.do("device page",
		chromedp.Click(css(`tr[data-device="kiosk-1"] a`)),
		chromedp.WaitVisible(css(`#tools tr[data-tool="hash_file"]`)),
		p.shot("3-device"),
	)
	keyID := signature.KeyID(testenv.TestKey(t))
	assert.Equal(t, keyID+" (verified)", p.text(`#tools tr[data-tool="signed_echo"] td.signer`))
	assert.Equal(t, "unsigned", p.text(`#tools tr[data-tool="hash_file"] td.signer`))
	assert.Equal(t, "–", p.text(`#tools tr[data-tool="install_tool"] td.signer`), "a meta tool is no module")
	options := eval[[]string](p, `[...document.querySelectorAll("#run-tool option")].map((o) => o.text)`)
	require.NotEmpty(t, options)
	for _, o := range options {
		assert.NotRegexp(t, `^(install_tool|list_tools) `, o, "no meta tool in the run form")
	}
	chosen := eval[string](p, `document.querySelector("#run-tool").selectedOptions[0].text`)
	assert.Equal(t, options[0], chosen)
	assert.NotContains(t, p.text("#run-params"), "module", "the form opens on a real tool's parameters")

	// Run hash_file from the device's page and see its result.
	sum := sha256.Sum256(content)
	p.do("run hash_file",
		selectOption("#run-tool", "hash_file "),
		chromedp.SetValue(css("#run-params"), `{"path": `+jsString(filepath.Join(files, "config.txt"))+`}`),
		chromedp.Click(css("#run-submit")),
		chromedp.WaitVisible(css("#run-status.success")),
		p.shot("4-device-hash_file"),
	)
	assert.Contains(t, p.text("#run-output"), hex.EncodeToString(sum[:]))

	// Dispatch a plan and watch it finish, live.
	plan := "task_name: browser-check\nsteps:\n" +
		"  - tool: stock.hash_file\n    parameters: {path: " + filepath.Join(files, "config.txt") + "}\n" +
		"  - tool: stock.list_dir\n    parameters: {path: " + files + "}\n"
	p.do("dispatch",
		chromedp.Click(css(`nav a[href="#/dispatch"]`)),
		chromedp.WaitVisible(css("#dispatch-plan")),
		chromedp.SetValue(css("#dispatch-plan"), plan),
		p.shot("5-dispatch"),
		chromedp.Click(css("#dispatch-submit")),
		chromedp.WaitVisible(css("#task-state.completed")),
		chromedp.WaitVisible(css("#task-steps tbody tr:nth-child(2)")),
		p.shot("6-task"),
	)
	assert.Contains(t, p.text("#task-events"), "task completed", "the page followed the task's events")

	// The same plan for every device labelled site=lobby: a fleet.
	p.do("fleet",
		chromedp.Click(css(`nav a[href="#/dispatch"]`)),
		chromedp.WaitVisible(css("#dispatch-plan")),
		chromedp.Click(css("#dispatch-to-labels")),
		chromedp.SendKeys(css("#dispatch-labels"), "site=lobby"),
		chromedp.SetValue(css("#dispatch-plan"), plan),
		chromedp.Click(css("#dispatch-submit")),
		chromedp.WaitVisible(css("#task-state.completed")),
		chromedp.WaitVisible(css(`#fleet-devices tr[data-device="kiosk-1"] .badge.completed`)),
		p.shot("7-fleet"),
	)
	assert.Contains(t, p.text("#task-events"), "kiosk-1: completed")

	// The task list shows it.
	p.do("tasks",
		chromedp.Click(css(`nav a[href="#/tasks"]`)),
		chromedp.WaitVisible(css("#tasks tbody tr")),
		// One page: the tasks come a page at a time, and there is no other.
		chromedp.WaitVisible(css("#tasks-newer[disabled]")),
		chromedp.WaitVisible(css("#tasks-older[disabled]")),
		p.shot("8-tasks"),
	)
	tasks := p.text("#tasks")
	assert.Contains(t, tasks, "browser-check")
	assert.Contains(t, tasks, "completed")
	// Item 5 of issue 43: each row shows the random end of its task's id,
	// which tells the tasks of a minute apart, and holds the whole id for
	// aipctl task.
	ids := p.texts("#tasks tbody tr td:first-child a")
	full := eval[[]string](p, `[...document.querySelectorAll("#tasks tbody tr")].map((r) => r.dataset.task)`)
	titles := eval[[]string](p, `[...document.querySelectorAll("#tasks tbody tr td:first-child a")].map((a) => a.title)`)
	require.Len(t, ids, len(full))
	require.Greater(t, len(ids), 1)
	for i, id := range full {
		assert.Equal(t, id[len(id)-8:], ids[i])
	}
	assert.Equal(t, full, titles, "the whole id, on hovering")
	assert.Len(t, slices.Compact(slices.Sorted(slices.Values(ids))), len(ids), "no two rows read the same")

	// A task opened after it ended still lists its events.
	all, err := c.api.Tasks(context.Background(), "", 0)
	require.NoError(t, err)
	planTask := ""
	for _, task := range all {
		if task.Kind == api.KindPlan && task.ParentID == "" {
			planTask = task.SessionID
		}
	}
	require.NotEmpty(t, planTask, "the plan dispatched to kiosk-1 is listed")
	p.do("ended task",
		chromedp.Click(css(`#tasks tr[data-task="`+planTask+`"] a`)),
		chromedp.WaitVisible(css("#task-state.completed")),
		chromedp.WaitVisible(css("#task-events li")),
		p.shot("9-ended-task"),
	)
	assert.Contains(t, p.text("#task-events"), "step 2/2 stock.list_dir success")
	assert.Equal(t, planTask, p.text("#task-id"), "the whole id, to copy")

	// Log out: back to the login page, without the navigation.
	p.do("log out",
		chromedp.Click(css("#logout")),
		chromedp.WaitVisible(css("#login-token")),
		p.shot("10-logged-out"),
	)
	assert.Equal(t, "none", p.display("#nav"))
}

func TestAScopedViewersDashboardShowsItsScopeAndEndsWhenRevoked(t *testing.T) {
	p := newPage(t)
	c := newCluster(t)
	ctx := context.Background()
	for id, site := range map[string]string{"kiosk-1": "lobby", "depot-1": "depot"} {
		_, err := c.api.Enroll(ctx, api.EnrollRequest{ID: id, Labels: map[string]string{"site": site}})
		require.NoError(t, err)
	}
	viewer, err := c.api.AddIdentity(ctx, api.IdentityRequest{Name: "lobby-viewer", Role: api.RoleViewer, Scope: &api.Scope{Devices: "site=lobby"}})
	require.NoError(t, err)

	p.do("login as a scoped viewer",
		chromedp.Navigate(c.http.URL+"/"),
		chromedp.WaitVisible(css("#login-token")),
		chromedp.SendKeys(css("#login-token"), viewer.Token),
		chromedp.Click(css("#login-submit")),
		chromedp.WaitVisible(css(`tr[data-device="kiosk-1"]`)),
		p.shot("1-scoped-devices"),
	)
	assert.Equal(t, "lobby-viewer (viewer · site=lobby)", p.text("#whoami"))
	assert.NotContains(t, p.text("#devices"), "depot-1", "a device outside the scope is not there")
	p.do("a viewer runs nothing",
		chromedp.Click(css(`tr[data-device="kiosk-1"] a`)),
		chromedp.WaitVisible(css("#device-state")),
		chromedp.WaitNotPresent(css("#run-tool")),
		chromedp.WaitNotVisible(css("#nav-dispatch")),
		p.shot("2-scoped-device"),
	)

	// Revoked, its login ends: the page's next call finds it gone and
	// asks for a token again.
	require.NoError(t, c.api.RevokeIdentity(ctx, "lobby-viewer"))
	p.do("revoked",
		chromedp.WaitVisible(css("#login-token")),
		p.shot("3-revoked"),
	)
}

// TestTheDashboardFollowsARolloutAndSteersIt applies a rollout to three
// of four agents, in two waves with a hand approval between them, and
// follows it on the dashboard: the list, the rollout's page with each
// device's state as it changes, and its buttons, which an admin uses and
// which a viewer and a scoped deployer do not get.
func TestTheDashboardFollowsARolloutAndSteersIt(t *testing.T) {
	p := newPage(t)
	c := newCluster(t)
	f := newFleet(c.api, c.wsURL())
	lobby := []string{"kiosk-1", "kiosk-2", "kiosk-3"}
	for _, id := range lobby {
		f.add(t, id, map[string]string{"site": "lobby"})
	}
	f.add(t, "depot-1", map[string]string{"site": "depot"})
	greet, hello := fleetTool(t, "echo", "greet", "1"), fleetTool(t, "echo", "hello", "1")
	spec := map[string]any{"name": "kiosk-tools", "selector": "site=lobby", "waves": []any{1, "100%"}, "between_waves": "approve",
		"health": []any{map[string]any{"tool": "greet", "parameters": map[string]any{"name": "probe"}}}}
	require.Equal(t, 1, f.apply(t, spec, greet, hello))
	r := f.waitState(t, "kiosk-tools", api.RolloutApproval)
	canary := r.Devices[0].DeviceID

	p.do("login and the list",
		chromedp.Navigate(c.http.URL+"/"),
		chromedp.WaitVisible(css("#login-token")),
		chromedp.SendKeys(css("#login-token"), c.api.Token),
		chromedp.Click(css("#login-submit")),
		chromedp.WaitVisible(css("#view p.muted, #devices")),
		chromedp.Click(css(`nav a[href="#/rollouts"]`)),
		chromedp.WaitVisible(css(`#rollouts tr[data-rollout="kiosk-tools"] .badge.approval`)),
		p.shot("1-rollouts"),
	)
	row := `#rollouts tr[data-rollout="kiosk-tools"]`
	assert.Equal(t, "1", p.text(row+" td.revision"))
	assert.Equal(t, "site=lobby", p.text(row+" td.mono"))
	assert.Equal(t, []string{"2 pending", "1 done"}, p.texts(row+" td.devices .badge"), "the devices by state")

	p.do("the rollout waiting for approval",
		chromedp.Click(css(row+" a")),
		chromedp.WaitVisible(css("#rollout-state.approval")),
		chromedp.WaitVisible(css(`#rollout-devices tr[data-device="`+canary+`"] .badge.done`)),
		p.shot("2-rollout-approval"),
	)
	assert.Equal(t, digestOf(greet), p.text(`#rollout-tools tr[data-tool="greet"] td.digest`))
	assert.Equal(t, digestOf(hello), p.text(`#rollout-tools tr[data-tool="hello"] td.digest`))
	assert.Equal(t, []string{"1", "1", "1", "open", "1 done"}, p.texts(`#rollout-waves tr[data-wave="1"] td`))
	assert.Equal(t, []string{"2", "100%", "2", "not yet", "2 pending"}, p.texts(`#rollout-waves tr[data-wave="2"] td`))
	devices := eval[[]string](p, `[...document.querySelectorAll("#rollout-devices tbody tr")].map((tr) => tr.dataset.device)`)
	assert.ElementsMatch(t, lobby, devices, "the selected devices, and no other")
	assert.Equal(t, canary, devices[0], "the canary is in the first wave")
	canaryRow := `#rollout-devices tr[data-device="` + canary + `"]`
	assert.Equal(t, "online", p.text(canaryRow+" td.online"))
	assert.Equal(t, "1", p.text(canaryRow+" td.applied"))
	assert.Equal(t, r.Devices[0].TaskID[len(r.Devices[0].TaskID)-8:], p.text(canaryRow+" td.task a"))
	for _, id := range devices[1:] {
		assert.Equal(t, "pending", p.text(`#rollout-devices tr[data-device="`+id+`"] td.state`), id)
		assert.Equal(t, "none → 1", p.text(`#rollout-devices tr[data-device="`+id+`"] td.applied`), id)
	}
	assert.Equal(t, "Approve next wave", p.text("#rollout-resume"))
	assert.Equal(t, "desired", p.text(`#rollout-history tr[data-revision="1"] td:nth-child(3)`))

	// The approval opens the second wave; the page follows its devices.
	p.do("approve",
		chromedp.Click(css("#rollout-resume")),
		chromedp.WaitVisible(css("#rollout-state.done")),
		chromedp.WaitVisible(css(`#rollout-devices tr[data-device="`+devices[1]+`"] .badge.done`)),
		chromedp.WaitVisible(css(`#rollout-devices tr[data-device="`+devices[2]+`"] .badge.done`)),
		p.shot("3-rollout-done"),
	)
	for _, id := range lobby {
		assert.Equal(t, "1", p.text(`#rollout-devices tr[data-device="`+id+`"] td.applied`), id)
	}
	assert.True(t, eval[bool](p, `document.querySelector("#rollout-resume").disabled`), "a done rollout has nothing to resume")

	p.do("pause",
		chromedp.Click(css("#rollout-pause")),
		chromedp.WaitVisible(css("#rollout-state.paused")),
		p.shot("4-rollout-paused"),
	)
	assert.Equal(t, "paused by "+"admin", p.text("#rollout-reason"))
	p.do("resume",
		chromedp.Click(css("#rollout-resume")),
		chromedp.WaitVisible(css("#rollout-state.done")),
		chromedp.WaitNotPresent(css("#rollout-reason")),
	)

	// A device's last task is a link to its page.
	p.do("a device's task",
		chromedp.Click(css(canaryRow+" td.task a")),
		chromedp.WaitVisible(css("#task-state.completed")),
		chromedp.NavigateBack(),
		chromedp.WaitVisible(css("#rollout-state.done")),
	)

	// A second revision whose health check fails on its canary pauses
	// the rollout: the canary shows failed, with its error, and a device
	// stopped meanwhile shows offline.
	stopped := devices[2]
	f.stop(t, stopped)
	spec["on_failure"] = "pause"
	require.Equal(t, 2, f.apply(t, spec, fleetTool(t, "fail", "greet", "2"), hello))
	p.do("a failed canary",
		chromedp.WaitVisible(css("#rollout-state.paused")),
		chromedp.WaitVisible(css("#rollout-devices .badge.failed")),
		chromedp.WaitVisible(css(`#rollout-history tr[data-revision="2"]`)),
		p.shot("5-rollout-failed"),
	)
	assert.Contains(t, p.text("#rollout-reason"), "1 of 1 devices failed, past max_failures 0")
	assert.NotEmpty(t, p.text(`#rollout-devices tr:has(.badge.failed) td.error`))
	assert.Equal(t, "offline", p.text(`#rollout-devices tr[data-device="`+stopped+`"] td.online`))
	assert.Equal(t, "superseded", p.text(`#rollout-history tr[data-revision="1"] td:nth-child(3)`))

	// A rollback asks for a second click; then the devices go back to
	// revision 1.
	p.do("roll back",
		chromedp.Click(css("#rollout-rollback")),
		chromedp.WaitVisible(css(`#rollout-rollback[data-armed]`)),
	)
	assert.Equal(t, "Confirm roll back", p.text("#rollout-rollback"))
	p.do("confirm roll back",
		chromedp.Click(css("#rollout-rollback")),
		chromedp.WaitVisible(css("#rollout-state.rolled_back")),
		p.shot("6-rollout-rolled-back"),
	)
	assert.Equal(t, "1 (latest 2)", p.text("#rollout-revision"))
	assert.Equal(t, "desired", p.text(`#rollout-history tr[data-revision="1"] td:nth-child(3)`))
	assert.Equal(t, "rolled back: rolled back by admin", p.text(`#rollout-history tr[data-revision="2"] td:nth-child(3)`))

	// A viewer, and a deployer with a scope, see the rollout without its
	// buttons: the API would refuse them.
	ctx := context.Background()
	viewer, err := c.api.AddIdentity(ctx, api.IdentityRequest{Name: "watcher", Role: api.RoleViewer})
	require.NoError(t, err)
	scoped, err := c.api.AddIdentity(ctx, api.IdentityRequest{Name: "lobby-deployer", Role: api.RoleDeployer, Scope: &api.Scope{Devices: "site=lobby"}})
	require.NoError(t, err)
	for _, who := range []api.TokenResponse{viewer, scoped} {
		p.do("as "+who.Identity,
			chromedp.Click(css("#logout")),
			chromedp.WaitVisible(css("#login-token")),
			chromedp.SendKeys(css("#login-token"), who.Token),
			chromedp.Click(css("#login-submit")),
			chromedp.WaitVisible(css("#nav")),
			chromedp.Navigate(c.http.URL+"/#/rollouts/kiosk-tools"),
			chromedp.WaitVisible(css("#rollout-state.rolled_back")),
			chromedp.WaitVisible(css("#rollout-devices tbody tr")),
			p.shot("7-rollout-as-"+who.Identity),
		)
		assert.False(t, eval[bool](p, `!!document.querySelector("#rollout-actions, #rollout-pause, #rollout-resume, #rollout-rollback")`),
			"%s gets no buttons", who.Identity)
		assert.NotContains(t, p.text("#view"), "null", "nothing stands in for the buttons")
	}
}
