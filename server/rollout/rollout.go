// Package rollout is the model and parser of edgeaip rollout files: a
// named desired state (a set of tool modules) for the devices a label
// selector picks, reached in waves, with health checks, a failure budget
// and what to do past it. A file is YAML or JSON:
//
//	name: kiosk-tools
//	selector: {site: lobby}
//	agent: 1.4.0              # an agent release, for each device's platform
//	agent_trial: 2m           # to register and pass health, or roll back
//	tools: [greet.wasm, hash_file.wasm]
//	health:
//	  - tool: greet
//	    parameters: {name: probe}
//	waves: [1, 10%, 100%]
//	between_waves: 30s        # or "approve": wait for aipctl rollout resume
//	max_failures: 0           # a count, or a percentage such as 10%
//	min_devices: 0            # devices done before a percentage counts
//	on_failure: rollback      # or pause (the default)
//	device_timeout: 2m
//
// In a file, tools are module paths, relative to the file; aipctl uploads
// each and sends the server their SHA-256 digests (Spec.Tools then holds
// digests). A rollout names tools, an agent release, or both. The
// package has no server dependencies, so aipctl can check a
// file before it sends it; the server checks the selector and the digests.
package rollout

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/plan"
	"gopkg.in/yaml.v3"
)

// Defaults and bounds.
const (
	DefaultDeviceTimeout = 5 * time.Minute
	// DefaultAgentTrial is how long a new agent has, from its start on
	// a device, to register and pass the health checks.
	DefaultAgentTrial = 2 * time.Minute
	MaxDeviceTimeout  = 24 * time.Hour
	MaxTools          = 64
	MaxWaves          = 20
	// MaxBytes caps a rollout file.
	MaxBytes = 1 << 20
)

// What to do past max_failures.
const (
	OnFailurePause    = "pause"
	OnFailureRollback = "rollback"
)

// Approve is between_waves' value that waits for a person: the next wave
// opens on aipctl rollout resume.
const Approve = "approve"

// Spec is a rollout, as its file and the API write it.
type Spec struct {
	// Name names the rollout, and the namespace its tools have on a
	// device: 1-64 of [A-Za-z0-9_-], not starting with '-'.
	Name string `yaml:"name" json:"name"`
	// Selector picks the devices: "k=v,k2!=v2", or in a file a mapping
	// of labels that must all match.
	Selector Selector `yaml:"selector" json:"selector"`
	// Tools are module paths in a file, SHA-256 digests (hex) in the API.
	Tools []string `yaml:"tools" json:"tools"`
	// Agent is the version of the agent release each device runs,
	// published for its OS and architecture (aipctl agent publish);
	// empty: the rollout leaves the agent alone.
	Agent string `yaml:"agent" json:"agent,omitempty"`
	// AgentTrial is how long a device's new agent has, from its start,
	// to register and pass the health checks before it is committed; past
	// it the device brings its previous agent back. Default 2m.
	AgentTrial plan.Duration `yaml:"agent_trial" json:"agent_trial,omitempty"`
	// Health are plan steps each device must pass after it changes.
	Health []plan.Step `yaml:"health" json:"health,omitempty"`
	// Waves are how many devices have changed once each wave is done,
	// counts or percentages of the selected devices; the last is 100%.
	// Default: one wave of 100%.
	Waves []Wave `yaml:"waves" json:"waves,omitempty"`
	// BetweenWaves is the wait before the next wave opens: a duration,
	// or Approve. Default: none.
	BetweenWaves string `yaml:"between_waves" json:"between_waves,omitempty"`
	// MaxFailures is how many devices may fail before the rollout stops:
	// a count, or a percentage of the devices done once MinDevices are.
	MaxFailures Threshold `yaml:"max_failures" json:"max_failures"`
	MinDevices  int       `yaml:"min_devices" json:"min_devices,omitempty"`
	// OnFailure is OnFailurePause (the default) or OnFailureRollback.
	OnFailure string `yaml:"on_failure" json:"on_failure,omitempty"`
	// DeviceTimeout bounds one device's change, health checks included.
	DeviceTimeout plan.Duration `yaml:"device_timeout" json:"device_timeout,omitempty"`
}

// Selector is a label selector. In YAML it may be a mapping of labels,
// which becomes "k=v,..." in key order.
type Selector string

// UnmarshalYAML reads a selector string or a mapping of labels.
func (s *Selector) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var text string
		if err := n.Decode(&text); err != nil {
			return err
		}
		*s = Selector(text)
		return nil
	}
	var labels map[string]string
	if err := n.Decode(&labels); err != nil {
		return fmt.Errorf("line %d: want a mapping of labels or \"k=v,...\"", n.Line)
	}
	*s = SelectorOf(labels)
	return nil
}

// SelectorOf is the selector that requires every label of labels.
func SelectorOf(labels map[string]string) Selector {
	parts := make([]string, 0, len(labels))
	for k, v := range labels {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return Selector(strings.Join(parts, ","))
}

// Wave is a cumulative number of devices: a count, or a percentage.
type Wave struct {
	N       int
	Percent bool
}

// String writes w as a file does: "3" or "10%".
func (w Wave) String() string {
	if w.Percent {
		return fmt.Sprintf("%d%%", w.N)
	}
	return fmt.Sprint(w.N)
}

// Of is how many of total devices w counts: a percentage rounds up, so
// that a wave of a small fleet is never empty.
func (w Wave) Of(total int) int {
	n := w.N
	if w.Percent {
		n = (total*w.N + 99) / 100
	}
	return min(n, total)
}

// UnmarshalYAML reads 3 or "10%".
func (w *Wave) UnmarshalYAML(n *yaml.Node) error { return w.parse(n.Value) }

// MarshalJSON writes 3 or "10%".
func (w Wave) MarshalJSON() ([]byte, error) {
	if w.Percent {
		return json.Marshal(w.String())
	}
	return json.Marshal(w.N)
}

func (w *Wave) parse(s string) error {
	t, err := parseThreshold(s)
	*w = Wave(t)
	if err == nil && w.N < 1 {
		err = fmt.Errorf("%q: a wave changes at least one device", s)
	}
	return err
}

// Threshold is a count, or a percentage.
type Threshold struct {
	N       int
	Percent bool
}

// String writes t as a file does.
func (t Threshold) String() string { return Wave(t).String() }

// UnmarshalYAML reads 2 or "10%".
func (t *Threshold) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseThreshold(n.Value)
	*t = v
	return err
}

// MarshalJSON writes 2 or "10%".
func (t Threshold) MarshalJSON() ([]byte, error) { return Wave(t).MarshalJSON() }

// Exceeded reports whether failed devices, of done devices finished
// (failed ones among them), are past t once minDevices are done.
func (t Threshold) Exceeded(failed, done, minDevices int) bool {
	if !t.Percent {
		return failed > t.N
	}
	return done >= max(minDevices, 1) && failed*100 > t.N*done
}

var thresholdRe = regexp.MustCompile(`^([0-9]{1,7})(%?)$`)

func parseThreshold(s string) (Threshold, error) {
	m := thresholdRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Threshold{}, fmt.Errorf("%q: want a whole number, or a percentage such as 10%%", s)
	}
	var t Threshold
	fmt.Sscan(m[1], &t.N)
	t.Percent = m[2] == "%"
	if t.Percent && t.N > 100 {
		return t, fmt.Errorf("%q: a percentage is at most 100%%", s)
	}
	return t, nil
}

// nameRe is a rollout's name: it is its tools' namespace on a device.
var nameRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$`)

// digestRe is a module's SHA-256, as the API names it.
var digestRe = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Parse reads a rollout file (YAML or JSON) and checks it; its tools are
// paths. Its error lists every problem, each naming its field.
func Parse(data []byte) (*Spec, error) { return parse(data, false) }

// ParseDigests reads a rollout as the API takes it (JSON, read as the
// YAML it is): Parse, with SHA-256 digests for tools.
func ParseDigests(data []byte) (*Spec, error) { return parse(data, true) }

func parse(data []byte, digests bool) (*Spec, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("rollout: %d bytes is more than the limit of %d", len(data), MaxBytes)
	}
	// Measured before it is decoded: its aliases may describe far more
	// than its bytes (plan.CheckExpanded).
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	if err := plan.CheckExpanded(&doc, plan.DefaultMaxExpandedBytes); err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	var s Spec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	if err := s.Check(digests); err != nil {
		return nil, err
	}
	return &s, nil
}

// Check checks s and fills in its defaults. digests: its tools are
// SHA-256 digests (the API's form), else paths (a file's).
func (s *Spec) Check(digests bool) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if !nameRe.MatchString(s.Name) {
		bad("name", "%q: want 1-64 of [A-Za-z0-9_-], not starting with '-' (it names the tools' namespace on a device)", s.Name)
	}
	if strings.TrimSpace(string(s.Selector)) == "" {
		bad("selector", "want at least one label: a rollout to every device names a label they all have")
	}
	s.checkTools(digests, bad)
	s.checkAgent(bad)
	s.checkWaves(bad)
	if err := s.checkHealth(); err != nil {
		errs = append(errs, err)
	}
	switch s.OnFailure {
	case "":
		s.OnFailure = OnFailurePause
	case OnFailurePause, OnFailureRollback:
	default:
		bad("on_failure", "%q: want pause or rollback", s.OnFailure)
	}
	if s.MinDevices < 0 {
		bad("min_devices", "want 0 or more")
	}
	switch d := time.Duration(s.DeviceTimeout); {
	case d == 0:
		s.DeviceTimeout = plan.Duration(DefaultDeviceTimeout)
	case d < 0 || d > MaxDeviceTimeout:
		bad("device_timeout", "%s: want a duration above 0 and at most %s", d, MaxDeviceTimeout)
	}
	if len(errs) > 0 {
		return fmt.Errorf("rollout %s: %w", s.Name, errors.Join(errs...))
	}
	return nil
}

func (s *Spec) checkTools(digests bool, bad func(string, string, ...any)) {
	switch {
	case len(s.Tools) == 0 && s.Agent == "":
		bad("tools", "want 1 to %d modules, or an agent release (agent: VERSION), or both", MaxTools)
	case len(s.Tools) > MaxTools:
		bad("tools", "want 1 to %d modules", MaxTools)
	}
	seen := map[string]bool{}
	for i, t := range s.Tools {
		switch {
		case seen[t]:
			bad(fmt.Sprintf("tools[%d]", i), "%q is listed twice", t)
		case digests && !digestRe.MatchString(t):
			bad(fmt.Sprintf("tools[%d]", i), "%q: want a module's SHA-256, 64 lower-case hex digits", t)
		case !digests && !strings.HasSuffix(t, ".wasm"):
			bad(fmt.Sprintf("tools[%d]", i), "%q: want the path of a .wasm module", t)
		}
		seen[t] = true
	}
}

// checkAgent checks the agent release's version and trial, once the
// device timeout has its default.
func (s *Spec) checkAgent(bad func(string, string, ...any)) {
	if s.Agent == "" {
		if s.AgentTrial != 0 {
			bad("agent_trial", "is for an agent release: name one with agent: VERSION")
		}
		return
	}
	if err := (agentrelease.Release{Version: s.Agent}).CheckVersion(); err != nil {
		bad("agent", "%v", err)
	}
	timeout := cmp.Or(time.Duration(s.DeviceTimeout), DefaultDeviceTimeout)
	switch d := time.Duration(s.AgentTrial); {
	case d == 0:
		s.AgentTrial = plan.Duration(min(DefaultAgentTrial, timeout/2))
	case d < time.Second || d >= timeout:
		bad("agent_trial", "%s: want a duration from 1s and below device_timeout (%s), which also covers the download", d, timeout)
	}
}

func (s *Spec) checkWaves(bad func(string, string, ...any)) {
	if len(s.Waves) == 0 {
		s.Waves = []Wave{{N: 100, Percent: true}}
	}
	if len(s.Waves) > MaxWaves {
		bad("waves", "at most %d", MaxWaves)
	}
	if last := s.Waves[len(s.Waves)-1]; last != (Wave{N: 100, Percent: true}) {
		bad("waves", "the last wave must be 100%%, not %s: past it, the selected devices would never change", last)
	}
	for i := 1; i < len(s.Waves); i++ {
		a, b := s.Waves[i-1], s.Waves[i]
		if a.Percent == b.Percent && a.N >= b.N {
			bad(fmt.Sprintf("waves[%d]", i), "%s after %s: each wave counts the devices changed so far, so it grows", b, a)
		}
	}
	switch bw := s.BetweenWaves; bw {
	case "", Approve:
	default:
		if d, err := time.ParseDuration(bw); err != nil || d < 0 {
			bad("between_waves", "%q: want a duration such as 5m, or %q", bw, Approve)
		}
	}
}

// checkHealth holds the health steps to a plan's rules.
func (s *Spec) checkHealth() error {
	if len(s.Health) == 0 {
		return nil
	}
	if _, err := s.HealthPlan(); err != nil {
		return fmt.Errorf("health: %w", err)
	}
	for i, st := range s.Health {
		for _, a := range append([]plan.Action{st.Action}, st.Actions...) {
			if name := cmp.Or(a.ToolName, a.Tool); slices.Contains(metaTools, name) {
				return fmt.Errorf("health[%d]: %s changes a device's tools: a health check only looks", i, name)
			}
		}
	}
	return nil
}

// metaTools are the agent's meta tools that change its tools: no health
// check may call them, since it runs as the rollout itself.
var metaTools = []string{protocol.InstallToolName, protocol.StageModuleName, protocol.ApplyRevisionName,
	protocol.StageReleaseName, protocol.ApplyReleaseName, protocol.EndTrialName, protocol.RevertReleaseName}

// HealthPlan is the health checks as a plan: what a device runs after it
// changes. Nil if there are none.
func (s *Spec) HealthPlan() (*plan.Plan, error) {
	if len(s.Health) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(plan.Plan{TaskName: "rollout-" + s.Name + "-health", Steps: s.Health})
	if err != nil {
		return nil, err
	}
	return plan.Parse(b)
}

// Wait is the wait before the next wave opens, and whether a person
// must approve it instead.
func (s *Spec) Wait() (d time.Duration, approve bool) {
	if s.BetweenWaves == Approve {
		return 0, true
	}
	d, _ = time.ParseDuration(s.BetweenWaves)
	return d, false
}

// WaveSizes are how many of total devices have changed once each wave is
// done: cumulative, the last total.
func (s *Spec) WaveSizes(total int) []int {
	out := make([]int, len(s.Waves))
	for i, w := range s.Waves {
		out[i] = w.Of(total)
		if i > 0 {
			out[i] = max(out[i], out[i-1])
		}
	}
	return out
}
