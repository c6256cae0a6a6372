package rollout

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const issueExample = `name: kiosk-tools
selector: {site: lobby}
tools: [greet.wasm, hash_file.wasm]
health:
  - tool: greet
    parameters: {name: probe}
waves: [1, 10%, 100%]
max_failures: 0
on_failure: rollback
device_timeout: 2m
`

func TestTheIssuesExampleParses(t *testing.T) {
	s, err := Parse([]byte(issueExample))
	require.NoError(t, err)
	assert.Equal(t, "kiosk-tools", s.Name)
	assert.Equal(t, Selector("site=lobby"), s.Selector)
	assert.Equal(t, []string{"greet.wasm", "hash_file.wasm"}, s.Tools)
	assert.Equal(t, []Wave{{N: 1}, {N: 10, Percent: true}, {N: 100, Percent: true}}, s.Waves)
	assert.Equal(t, OnFailureRollback, s.OnFailure)
	assert.Equal(t, 2*time.Minute, time.Duration(s.DeviceTimeout))
	health, err := s.HealthPlan()
	require.NoError(t, err)
	require.Len(t, health.Steps, 1)
	assert.Equal(t, "greet", health.Steps[0].Tool)
}

func TestDefaultsAreOneWaveAPauseAndFiveMinutes(t *testing.T) {
	s, err := Parse([]byte("name: a\nselector: site=lobby,kind!=test\ntools: [x.wasm]\n"))
	require.NoError(t, err)
	assert.Equal(t, Selector("site=lobby,kind!=test"), s.Selector)
	assert.Equal(t, []Wave{{N: 100, Percent: true}}, s.Waves)
	assert.Equal(t, OnFailurePause, s.OnFailure)
	assert.Equal(t, DefaultDeviceTimeout, time.Duration(s.DeviceTimeout))
	assert.Equal(t, Threshold{}, s.MaxFailures)
}

func TestABadFileNamesEachFieldAtFault(t *testing.T) {
	_, err := Parse([]byte(`name: -bad
selector: {}
tools: [a.wasm, a.wasm, notes.txt]
waves: [10%, 5%, 50%]
between_waves: soon
on_failure: shrug
device_timeout: 48h
health:
  - tool: greet
    timeout: -1s
`))
	require.Error(t, err)
	for _, want := range []string{
		`name: "-bad"`,
		"selector: want at least one label",
		`tools[1]: "a.wasm" is listed twice`,
		`tools[2]: "notes.txt": want the path of a .wasm module`,
		"waves: the last wave must be 100%, not 50%",
		"waves[1]: 5% after 10%",
		`between_waves: "soon"`,
		`on_failure: "shrug": want pause or rollback`,
		"device_timeout: 48h0m0s",
		"health: ",
	} {
		assert.Contains(t, err.Error(), want)
	}
}

// A health check runs as the rollout, which may apply revisions: it may
// not change a device's tools.
func TestAHealthCheckMayNotChangeADevicesTools(t *testing.T) {
	for _, step := range []string{
		`{tool: apply_revision, parameters: {rollout: other, revision: 9, tools: {}}}`,
		`{tool_name: stage_module}`,
		`{actions: [{tool: greet}, {tool: install_tool}]}`,
	} {
		_, err := Parse([]byte("name: a\nselector: a=b\ntools: [x.wasm]\nhealth: [" + step + "]\n"))
		require.ErrorContains(t, err, "health[0]: ", step)
		require.ErrorContains(t, err, "changes a device's tools: a health check only looks", step)
	}
}

// A file whose aliases describe more than a plan may be is refused
// before it is decoded, as a plan is.
func TestAFileWhoseAliasesExpandPastTheBoundIsRefused(t *testing.T) {
	doc := "name: a\nselector: a=b\ntools: [x.wasm]\nhealth:\n  - tool: greet\n    parameters:\n      a: &a \"" + strings.Repeat("x", 4000) + "\"\n      b: ["
	for i := range 400 {
		if i > 0 {
			doc += ", "
		}
		doc += "*a"
	}
	_, err := Parse([]byte(doc + "]\n"))
	require.ErrorContains(t, err, "its YAML aliases expand it to at least")
}

func TestAnUnknownKeyIsRefused(t *testing.T) {
	_, err := Parse([]byte("name: a\nselector: a=b\ntools: [x.wasm]\nwave: [1]\n"))
	require.ErrorContains(t, err, "field wave not found")
}

func TestTheAPIsFormTakesDigestsAndRoundTrips(t *testing.T) {
	s, err := Parse([]byte(issueExample))
	require.NoError(t, err)
	s.Tools = []string{"bad"}
	require.ErrorContains(t, s.Check(true), `tools[0]: "bad": want a module's SHA-256`)
	s.Tools = []string{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
	require.NoError(t, s.Check(true))

	b, err := json.Marshal(s)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"waves":[1,"10%","100%"]`)
	back, err := ParseDigests(b)
	require.NoError(t, err)
	assert.Equal(t, s.Waves, back.Waves)
	assert.Equal(t, s.Selector, back.Selector)
	assert.Equal(t, s.DeviceTimeout, back.DeviceTimeout)
}

func TestWavesCountDevicesSoFarAndRoundUp(t *testing.T) {
	s := Spec{Waves: []Wave{{N: 1}, {N: 10, Percent: true}, {N: 100, Percent: true}}}
	assert.Equal(t, []int{1, 2, 15}, s.WaveSizes(15))
	assert.Equal(t, []int{1, 1, 1}, s.WaveSizes(1))
	assert.Equal(t, []int{0, 0, 0}, s.WaveSizes(0))
}

func TestAFailureBudgetIsExceededPastItsThreshold(t *testing.T) {
	assert.False(t, Threshold{N: 0}.Exceeded(0, 5, 0))
	assert.True(t, Threshold{N: 0}.Exceeded(1, 5, 0))
	assert.False(t, Threshold{N: 2}.Exceeded(2, 5, 0))
	ten := Threshold{N: 10, Percent: true}
	assert.False(t, ten.Exceeded(1, 10, 0))
	assert.True(t, ten.Exceeded(2, 10, 0))
	assert.False(t, ten.Exceeded(2, 10, 20), "below min_devices a percentage does not count")
}

func TestARolloutMayNameAnAgentReleaseWithOrWithoutTools(t *testing.T) {
	s, err := Parse([]byte("name: a\nselector: {site: lobby}\nagent: 1.4.0\nhealth:\n  - tool: greet\n"))
	require.NoError(t, err)
	assert.Equal(t, "1.4.0", s.Agent)
	assert.Equal(t, DefaultAgentTrial, time.Duration(s.AgentTrial))
	assert.Empty(t, s.Tools)

	s, err = Parse([]byte("name: a\nselector: {site: lobby}\nagent: 1.4.0\nagent_trial: 20s\ntools: [x.wasm]\ndevice_timeout: 1m\n"))
	require.NoError(t, err)
	assert.Equal(t, 20*time.Second, time.Duration(s.AgentTrial))

	_, err = Parse([]byte("name: a\nselector: {site: lobby}\n"))
	assert.ErrorContains(t, err, "tools: want 1 to 64 modules, or an agent release (agent: VERSION), or both")
	_, err = Parse([]byte("name: a\nselector: {site: lobby}\nagent: 1 4\nagent_trial: 10m\n"))
	assert.ErrorContains(t, err, `agent: "1 4": want letters`)
	assert.ErrorContains(t, err, "agent_trial: 10m0s: want a duration from 1s and below device_timeout (5m0s)")
	_, err = Parse([]byte("name: a\nselector: {site: lobby}\ntools: [x.wasm]\nagent_trial: 10s\n"))
	assert.ErrorContains(t, err, "agent_trial: is for an agent release")
	_, err = Parse([]byte("name: a\nselector: {site: lobby}\nagent: 2.0.0\nhealth:\n  - tool: end_trial\n"))
	assert.ErrorContains(t, err, "end_trial changes a device's tools")
}
