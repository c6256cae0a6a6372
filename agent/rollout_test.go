package agent

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent/internal/mcpproxy/mcptest"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const kiosk = "kiosk-tools"

// echoTool is the echo fixture as tool name at version, signed with the
// test key: each name and version is a module of its own digest.
func echoTool(t *testing.T, name, version string) []byte {
	t.Helper()
	mod, err := manifest.FromWasm(testenv.ReadSigned(t, "signed_echo"))
	require.NoError(t, err)
	mod.Manifest.Name, mod.Manifest.Version = name, version
	return packed(t, mod.Wasm, mod.Manifest)
}

func digest(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return hex.EncodeToString(sum[:])
}

func stage(t *testing.T, a *Agent, wasm []byte) protocol.Result {
	t.Helper()
	params, err := protocol.StageModuleParams(wasm)
	require.NoError(t, err)
	return run(a, protocol.StageModuleName, params)
}

// staged stages each module, which must be kept, and returns their
// digests.
func staged(t *testing.T, a *Agent, mods ...[]byte) []string {
	t.Helper()
	var shas []string
	for _, wasm := range mods {
		res := stage(t, a, wasm)
		require.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
		shas = append(shas, digest(wasm))
	}
	return shas
}

func applyRevision(a *Agent, rollout string, n int, tools map[string]string) protocol.Result {
	return run(a, protocol.ApplyRevisionName, protocol.ApplyRevisionParams(protocol.Revision{Rollout: rollout, Number: n, Tools: tools}))
}

// mustApply applies a revision that must succeed and returns its result.
func mustApply(t *testing.T, a *Agent, rollout string, n int, tools map[string]string) map[string]any {
	t.Helper()
	res := applyRevision(a, rollout, n, tools)
	require.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
	return res.Result.(map[string]any)
}

// versions are the tools of namespace ns the device lists, by name, with
// the version of the module each runs.
func versions(t *testing.T, a *Agent, ns string) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, info := range defaultComputer(t, a).ListTools("", ns, true) {
		out[info.ToolName] = info.Meta["version"]
	}
	return out
}

func rolloutFile(t *testing.T, data, rollout string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "rollouts", rollout+".json"))
	require.NoError(t, err)
	var state map[string]any
	require.NoError(t, json.Unmarshal(b, &state))
	return state
}

// drain empties the inventory signal, so that a test sees whether the
// next change sends it.
func drain(a *Agent) {
	select {
	case <-a.inventory:
	default:
	}
}

func TestARevisionReplacesARolloutsToolsAndARollbackNeedsNoStaging(t *testing.T) {
	data := t.TempDir()
	a := offlineAgent(t, data)
	greet1, hash1 := echoTool(t, "greet", "1"), echoTool(t, "hash_file", "1")
	rev1 := map[string]string{"greet": digest(greet1), "hash_file": digest(hash1)}
	assert.Equal(t, map[string]any{"sha256": digest(greet1), "tool": "greet", "bytes": int64(len(greet1)), "already": false},
		stage(t, a, greet1).Result)
	assert.Equal(t, true, stage(t, a, greet1).Result.(map[string]any)["already"], "staging is idempotent")
	staged(t, a, hash1)
	assert.Empty(t, versions(t, a, kiosk), "staging loads nothing")

	drain(a)
	out := mustApply(t, a, kiosk, 1, rev1)
	assert.Equal(t, false, out["unchanged"])
	assert.Len(t, out["tools"], 2)
	assert.Equal(t, map[string]any{"greet": "1", "hash_file": "1"}, versions(t, a, kiosk))
	assert.Len(t, a.inventory, 1, "the link registers again")
	res := run(a, "greet", map[string]any{"hello": "kiosk"})
	require.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
	assert.Equal(t, map[string]any{"hello": "kiosk"}, res.Result)

	greet2, hash2 := echoTool(t, "greet", "2"), echoTool(t, "hash_file", "2")
	rev2 := map[string]string{"greet": digest(greet2), "hash_file": digest(hash2)}
	staged(t, a, greet2, hash2)
	out = mustApply(t, a, kiosk, 2, rev2)
	assert.Equal(t, []any{}, out["removed"])
	assert.Equal(t, map[string]any{"greet": "2", "hash_file": "2"}, versions(t, a, kiosk))
	for _, sha := range rev1 {
		assert.FileExists(t, filepath.Join(data, "modules", sha+".wasm"), "the previous revision's modules stay")
	}
	state := rolloutFile(t, data, kiosk)
	assert.Equal(t, float64(2), state["revision"])
	assert.Equal(t, map[string]any{"revision": float64(1), "tools": map[string]any{"greet": rev1["greet"], "hash_file": rev1["hash_file"]}}, state["previous"])

	// The rollback is the previous revision applied again: no stage.
	mustApply(t, a, kiosk, 1, rev1)
	assert.Equal(t, map[string]any{"greet": "1", "hash_file": "1"}, versions(t, a, kiosk))
	assert.Equal(t, float64(2), rolloutFile(t, data, kiosk)["previous"].(map[string]any)["revision"])

	// A revision without one of the tools takes it off the device.
	out = mustApply(t, a, kiosk, 3, map[string]string{"greet": digest(greet2)})
	assert.Equal(t, []any{"hash_file"}, out["removed"])
	assert.Equal(t, map[string]any{"greet": "2"}, versions(t, a, kiosk))
	assert.Equal(t, protocol.ResultFailure, run(a, "hash_file", nil).Status)
}

func TestARevisionWithAModuleRefusedChangesNothing(t *testing.T) {
	data := t.TempDir()
	// This device's policy holds flood to one page of memory; its module
	// starts with two.
	a := newOfflineAgent(t, Config{DataDir: data, TrustedKeys: []ed25519.PublicKey{testenv.TestKey(t)},
		Policies: map[string]sandbox.Policy{kiosk + ".flood": {Limits: sandbox.Limits{MemoryPages: 1}}}})
	greet1, greet2 := echoTool(t, "greet", "1"), echoTool(t, "greet", "2")
	errflood, err := os.ReadFile(filepath.Join(testenv.TestdataTools(), "errflood.wasm"))
	require.NoError(t, err)
	flood := packed(t, errflood, manifest.Manifest{Name: "flood", ToolType: manifest.ToolTypeAction, InputSchema: map[string]any{"type": "object"}})
	staged(t, a, greet1, greet2, flood)
	mustApply(t, a, kiosk, 1, map[string]string{"greet": digest(greet1)})
	before, err := os.ReadFile(filepath.Join(data, "rollouts", kiosk+".json"))
	require.NoError(t, err)

	unsigned := testenv.ReadSigned(t, "unsigned_echo")
	res := stage(t, a, unsigned)
	assert.Contains(t, res.Error, `stage_module: tool "unsigned_echo" (staged module): refused: module is not signed`)
	assert.NoFileExists(t, filepath.Join(data, "modules", digest(unsigned)+".wasm"))

	for name, c := range map[string]struct {
		tools map[string]string
		want  string
	}{
		"policy": {map[string]string{"greet": digest(greet2), "flood": digest(flood)},
			`apply_revision: rollout "kiosk-tools" revision 2: tool "flood": memory starts at 2 pages, above the limit of 1 (rollout "kiosk-tools" revision 2)`},
		"unsigned, so never staged": {map[string]string{"greet": digest(greet2), "unsigned_echo": digest(unsigned)},
			`apply_revision: rollout "kiosk-tools" revision 2: module ` + digest(unsigned) + ` for tool "unsigned_echo" is not on this device; stage it first`},
		"another tool's module": {map[string]string{"greet": digest(greet2), "hello": digest(greet1)},
			`module ` + digest(greet1) + ` is tool "greet", not "hello" (rollout "kiosk-tools" revision 2)`},
	} {
		drain(a)
		res := applyRevision(a, kiosk, 2, c.tools)
		assert.Equal(t, protocol.ResultFailure, res.Status, name)
		assert.Contains(t, res.Error, c.want, name)
		assert.Equal(t, map[string]any{"greet": "1"}, versions(t, a, kiosk), name)
		after, err := os.ReadFile(filepath.Join(data, "rollouts", kiosk+".json"))
		require.NoError(t, err)
		assert.Equal(t, string(before), string(after), name)
		assert.Empty(t, a.inventory, name)
	}
}

func TestARestartLoadsTheCurrentRevisionAndARollbackStillNeedsNoStaging(t *testing.T) {
	data := t.TempDir()
	a := offlineAgent(t, data)
	v1, v2 := echoTool(t, "greet", "1"), echoTool(t, "greet", "2")
	staged(t, a, v1, v2)
	mustApply(t, a, kiosk, 1, map[string]string{"greet": digest(v1)})
	mustApply(t, a, kiosk, 2, map[string]string{"greet": digest(v2)})
	require.NoError(t, a.Close(context.Background()))

	b := offlineAgent(t, data)
	assert.Empty(t, b.tools.Refusals())
	assert.Equal(t, map[string]any{"greet": "2"}, versions(t, b, kiosk))
	res := run(b, "greet", map[string]any{"after": "restart"})
	require.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
	assert.Equal(t, true, mustApply(t, b, kiosk, 2, map[string]string{"greet": digest(v2)})["unchanged"])

	mustApply(t, b, kiosk, 1, map[string]string{"greet": digest(v1)})
	assert.Equal(t, map[string]any{"greet": "1"}, versions(t, b, kiosk))
}

func TestAModuleMissingAtStartIsRefusedAndTheAgentRunsWithTheRest(t *testing.T) {
	data := t.TempDir()
	a := offlineAgent(t, data)
	greet, hash := echoTool(t, "greet", "1"), echoTool(t, "hash_file", "1")
	staged(t, a, greet, hash)
	mustApply(t, a, kiosk, 1, map[string]string{"greet": digest(greet), "hash_file": digest(hash)})
	require.NoError(t, a.Close(context.Background()))
	require.NoError(t, os.Remove(filepath.Join(data, "modules", digest(hash)+".wasm")))

	b := offlineAgent(t, data)
	assert.Equal(t, map[string]any{"greet": "1"}, versions(t, b, kiosk))
	refusals := b.tools.Refusals()
	require.Len(t, refusals, 1)
	assert.Contains(t, refusals[0].Error, `module `+digest(hash)+` for tool "hash_file" is not on this device; stage it first`)

	// The server, seeing hash_file missing, stages it and applies again.
	staged(t, b, hash)
	out := mustApply(t, b, kiosk, 1, map[string]string{"greet": digest(greet), "hash_file": digest(hash)})
	assert.Equal(t, false, out["unchanged"], "a revision not wholly loaded is applied again")
	assert.Equal(t, map[string]any{"greet": "1", "hash_file": "1"}, versions(t, b, kiosk))
}

func TestApplyingTheCurrentRevisionAgainChangesNothing(t *testing.T) {
	data := t.TempDir()
	a := offlineAgent(t, data)
	greet := echoTool(t, "greet", "1")
	staged(t, a, greet)
	first := mustApply(t, a, kiosk, 1, map[string]string{"greet": digest(greet)})
	file := filepath.Join(data, "rollouts", kiosk+".json")
	before, err := os.Stat(file)
	require.NoError(t, err)
	loaded := defaultComputer(t, a).ListTools("", kiosk, true)

	drain(a)
	again := mustApply(t, a, kiosk, 1, map[string]string{"greet": digest(greet)})
	assert.Equal(t, true, again["unchanged"])
	assert.Equal(t, first["tools"], again["tools"])
	assert.Empty(t, a.inventory, "nothing to register again")
	after, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, before.ModTime(), after.ModTime(), "the state is not written again")
	assert.Equal(t, loaded, defaultComputer(t, a).ListTools("", kiosk, true))

	assert.Equal(t, true, mustApply(t, a, "never-applied", 4, nil)["unchanged"], "no tools of a rollout the device lacks: nothing to remove")
}

func TestAnEmptyRevisionRemovesOnlyThatRolloutsTools(t *testing.T) {
	data := t.TempDir()
	a := offlineAgent(t, data)
	require.Equal(t, protocol.ResultSuccess, install(t, a, "signed_echo", "").Status)
	greet, hash := echoTool(t, "greet", "1"), echoTool(t, "hash_file", "1")
	staged(t, a, greet, hash)
	mustApply(t, a, kiosk, 1, map[string]string{"greet": digest(greet)})
	mustApply(t, a, "lobby", 1, map[string]string{"hash_file": digest(hash)})

	out := mustApply(t, a, kiosk, 2, map[string]string{})
	assert.Equal(t, []any{"greet"}, out["removed"])
	assert.Empty(t, versions(t, a, kiosk))
	assert.Equal(t, map[string]any{"hash_file": "1"}, versions(t, a, "lobby"))
	assert.Equal(t, protocol.ResultSuccess, run(a, "signed_echo", nil).Status, "a hand deploy stays")
	assert.NoFileExists(t, filepath.Join(data, "rollouts", kiosk+".json"))
	rollouts, _ := a.tools.Rollouts()
	assert.NotContains(t, rollouts, kiosk)

	assert.Equal(t, true, mustApply(t, a, kiosk, 2, map[string]string{})["unchanged"], "sent again, it finds nothing to remove")
}

func TestAHandDeployOfARolloutsToolNeedsForceAndTheNextRevisionClearsIt(t *testing.T) {
	data := t.TempDir()
	a := offlineAgent(t, data)
	v1, v2, mine := echoTool(t, "greet", "1"), echoTool(t, "greet", "2"), echoTool(t, "greet", "by-hand")
	staged(t, a, v1, v2)
	mustApply(t, a, kiosk, 3, map[string]string{"greet": digest(v1)})

	res := installModule(t, a, mine, "")
	assert.Contains(t, res.Error, `install_tool: tool "greet" belongs to rollout "kiosk-tools" (revision 3); deploy with force to override it`)
	res = installModule(t, a, mine, kiosk)
	assert.Contains(t, res.Error, `tool "greet" belongs to rollout "kiosk-tools"`)
	assert.Equal(t, map[string]any{"greet": "1"}, versions(t, a, kiosk))
	other := installModule(t, a, echoTool(t, "other", "1"), kiosk)
	assert.Contains(t, other.Error, `namespace "kiosk-tools" holds the tools of rollout "kiosk-tools"; deploy into another namespace`)

	params, err := protocol.InstallToolParams(mine, "")
	require.NoError(t, err)
	params["force"] = true
	res = run(a, protocol.InstallToolName, params)
	require.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
	assert.Equal(t, kiosk, res.Result.(map[string]any)["rollout"])
	assert.Equal(t, map[string]any{"greet": "by-hand"}, versions(t, a, kiosk), "in place of the rollout's, in its namespace")
	rollouts, modules := a.tools.Rollouts()
	assert.Equal(t, map[string]string{"greet": digest(mine)}, rollouts[kiosk].Overrides, "the drift is reported")
	assert.Contains(t, modules, digest(mine))
	assert.Equal(t, true, mustApply(t, a, kiosk, 3, map[string]string{"greet": digest(v1)})["unchanged"], "the revision sent again leaves the override")

	require.NoError(t, a.Close(context.Background()))
	a = offlineAgent(t, data)
	assert.Equal(t, map[string]any{"greet": "by-hand"}, versions(t, a, kiosk), "the override is loaded at start")

	mustApply(t, a, kiosk, 4, map[string]string{"greet": digest(v2)})
	assert.Equal(t, map[string]any{"greet": "2"}, versions(t, a, kiosk))
	rollouts, _ = a.tools.Rollouts()
	assert.Empty(t, rollouts[kiosk].Overrides)
}

func TestRegistrationReportsRolloutsAndKeptModules(t *testing.T) {
	a := offlineAgent(t, t.TempDir())
	v1, v2, next := echoTool(t, "greet", "1"), echoTool(t, "greet", "2"), echoTool(t, "greet", "3")
	staged(t, a, v1, v2, next)
	mustApply(t, a, kiosk, 1, map[string]string{"greet": digest(v1)})
	mustApply(t, a, kiosk, 2, map[string]string{"greet": digest(v2)})

	info := a.systemInfo()
	rollouts, modules := protocol.RolloutsFromMetadata(info.CustomMetadata)
	assert.Equal(t, map[string]protocol.RolloutReport{kiosk: {Revision: 2, Tools: map[string]string{"greet": digest(v2)},
		PreviousRevision: 1, Overrides: map[string]string{}}}, rollouts)
	want := []string{digest(v1), digest(v2), digest(next)}
	assert.ElementsMatch(t, want, modules, "a module staged for a revision not yet applied is reported too")
	assert.IsNonDecreasing(t, modules)
}

func TestApplyingARevisionCollectsTheModulesNoRolloutNeeds(t *testing.T) {
	data := t.TempDir()
	a := offlineAgent(t, data)
	v1, v2, v3, upcoming := echoTool(t, "greet", "1"), echoTool(t, "greet", "2"), echoTool(t, "greet", "3"), echoTool(t, "greet", "4")
	staged(t, a, v1, v2, v3, upcoming)
	mustApply(t, a, kiosk, 1, map[string]string{"greet": digest(v1)})
	mustApply(t, a, kiosk, 2, map[string]string{"greet": digest(v2)})
	longAgo := time.Now().Add(-25 * time.Hour)
	for _, wasm := range [][]byte{v1, v2, v3} {
		require.NoError(t, os.Chtimes(filepath.Join(data, "modules", digest(wasm)+".wasm"), longAgo, longAgo))
	}

	mustApply(t, a, kiosk, 3, map[string]string{"greet": digest(v3)})
	_, modules := a.tools.Rollouts()
	assert.Equal(t, slices.Sorted(slices.Values([]string{digest(v2), digest(v3), digest(upcoming)})), modules,
		"v1 is neither current nor previous and was staged long ago; v2 is previous; upcoming was staged lately")
}

func TestARolloutsNamespaceAndToolsMustBeFree(t *testing.T) {
	a := newOfflineAgent(t, Config{DataDir: t.TempDir(), ToolDirs: []string{"signed=" + testenv.SignedTools()},
		TrustedKeys: []ed25519.PublicKey{testenv.TestKey(t)}, MCP: defaultAction(mcptest.Stdio(t, "helper"))})
	require.Equal(t, protocol.ResultSuccess, installModule(t, a, echoTool(t, "by_hand", "1"), "").Status)
	greet, echo := echoTool(t, "greet", "1"), testenv.ReadSigned(t, "signed_echo")
	staged(t, a, greet, echo)

	for rollout, want := range map[string]string{
		"signed":   `rollout "signed": namespace "signed" is loaded from the tools dir`,
		"deployed": `rollout "deployed": namespace "deployed" holds tools deployed by hand`,
		"helper":   `rollout "helper": namespace "helper" is an MCP server's`,
		"computer": `rollout "computer": the name is its tools' namespace`,
		"../up":    `rollout "../up": the name is its tools' namespace`,
	} {
		res := applyRevision(a, rollout, 1, map[string]string{"greet": digest(greet)})
		assert.Contains(t, res.Error, want, rollout)
	}
	res := applyRevision(a, kiosk, 1, map[string]string{"greet": digest(greet), "signed_echo": digest(echo)})
	assert.Contains(t, res.Error, `tool action::signed_echo is already registered by namespace "signed"`)
	assert.Empty(t, versions(t, a, kiosk), "all or nothing")

	mustApply(t, a, "lobby", 1, map[string]string{"greet": digest(greet)})
	res = applyRevision(a, kiosk, 1, map[string]string{"greet": digest(greet)})
	assert.Contains(t, res.Error, `tool action::greet is already registered by namespace "lobby"`)
}

// Over each wire, a revision staged and applied in one command is
// answered, and the device registers again with the rollout, as the
// server reads a registration (through encoding/json into a SystemInfo).
func TestARevisionAppliedOverTheLinkIsRegistered(t *testing.T) {
	for _, wire := range []protocol.Encoding{protocol.CBOR, protocol.JSON} {
		t.Run(wire.String(), func(t *testing.T) {
			p := newTestPeer(t)
			cfg := agentConfig(t, p.url())
			optional := false
			cfg.Wire, cfg.TrustedKeys, cfg.RequireSigned = wire, []ed25519.PublicKey{testenv.TestKey(t)}, &optional
			startAgent(t, cfg)
			l := p.next(t)
			greet := echoTool(t, "greet", "1")
			stageParams, err := protocol.StageModuleParams(greet)
			require.NoError(t, err)
			rev := protocol.Revision{Rollout: kiosk, Number: 1, Tools: map[string]string{"greet": digest(greet)}}
			m := newCommand("s1", action(protocol.StageModuleName, stageParams), action(protocol.ApplyRevisionName, protocol.ApplyRevisionParams(rev)))
			l.send(t, m)

			// The inventory may go out before the results; notices that
			// the tool is being prepared, on CBOR, come before both; and
			// a fixture the meter refuses sends an inventory of its own.
			var res []protocol.Result
			var reg protocol.ClientMessage
			for res == nil || reg.Type == "" {
				switch msg := l.next(t); msg.Type {
				case protocol.ClientCommandResults:
					res = msg.ActionResults
				case protocol.ClientRegister:
					if slices.Contains(inventory(t, msg.Metadata), "action::greet") {
						reg = msg
					}
				}
			}
			require.Len(t, res, 2)
			for _, r := range res {
				require.Equal(t, protocol.ResultSuccess, r.Status, r.Error)
			}
			applied := res[1].Result.(map[string]any)
			assert.Equal(t, false, applied["unchanged"])
			assert.Equal(t, "greet", applied["tools"].([]any)[0].(map[string]any)["tool_name"])

			b, err := json.Marshal(registeredInfo(t, reg))
			require.NoError(t, err)
			var info protocol.SystemInfo
			require.NoError(t, json.Unmarshal(b, &info))
			rollouts, modules := protocol.RolloutsFromMetadata(info.CustomMetadata)
			assert.Equal(t, map[string]protocol.RolloutReport{kiosk: {Revision: 1, Tools: rev.Tools, Overrides: map[string]string{}}}, rollouts)
			assert.Equal(t, []string{digest(greet)}, modules)
		})
	}
}
