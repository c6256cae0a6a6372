package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
)

// The agent's meta tools of rollouts (tool_type action, like
// install_tool). A rollout is a named set of tools, tool name to module
// SHA-256, in numbered revisions: the server stages the modules a device
// lacks with stage_module, then has it apply a revision with
// apply_revision, which changes the rollout's tools together or not at
// all.
const (
	StageModuleName   = "stage_module"
	ApplyRevisionName = "apply_revision"
)

// CarriesModule reports whether the meta tool name carries a module, or a
// chunk of an agent release, in its parameters (install_tool,
// stage_module, stage_release): admission does not count it
// against the parameters' bound (the frame's bounds it), and the audit log
// names the module's or the release's digest.
func CarriesModule(name string) bool {
	return name == InstallToolName || name == StageModuleName || name == StageReleaseName
}

// RolloutsOwn reports whether the meta tool name is one only a rollout
// calls: those that stage, apply and update the agent.
func RolloutsOwn(name string) bool {
	switch name {
	case StageModuleName, ApplyRevisionName, StageReleaseName, ApplyReleaseName, EndTrialName, RevertReleaseName:
		return true
	}
	return false
}

// The keys of a device's custom_metadata that report its rollouts at
// registration: RolloutsFromMetadata reads them.
const (
	RolloutsMetadataKey = "rollouts"
	ModulesMetadataKey  = "modules"
)

// moduleDigest is a module's SHA-256 as rollouts name it: 64 lowercase hex
// digits, which the agent also uses as a file name.
var moduleDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// StageModuleParams builds stage_module's parameters: the module and its
// SHA-256, encoded as install_tool's (InstallToolParams, no namespace).
func StageModuleParams(wasm []byte) (map[string]any, error) {
	return InstallToolParams(wasm, "")
}

// StageModuleSchema is the input schema of stage_module.
var StageModuleSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"module": InstallToolSchema["properties"].(map[string]any)["module"],
		"sha256": InstallToolSchema["properties"].(map[string]any)["sha256"],
	},
	"required":             []any{"module", "sha256"},
	"additionalProperties": false,
}

// Revision is one revision of a rollout as a device applies it: the
// rollout's name, the revision's number (from 1), and its tools, tool name
// to module SHA-256. No tools removes the rollout's tools from the device.
type Revision struct {
	Rollout string
	Number  int
	Tools   map[string]string
}

// ApplyRevisionSchema is the input schema of apply_revision.
var ApplyRevisionSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"rollout":  map[string]any{"type": "string", "description": "the rollout's name, which is also the namespace of its tools"},
		"revision": map[string]any{"type": "integer", "minimum": 1},
		"tools": map[string]any{
			"type":                 "object",
			"description":          "tool name to the hex SHA-256 of its module, staged first; empty removes the rollout's tools",
			"additionalProperties": map[string]any{"type": "string", "pattern": moduleDigest.String()},
		},
	},
	"required":             []any{"rollout", "revision", "tools"},
	"additionalProperties": false,
}

// ApplyRevisionParams builds apply_revision's parameters, in the shape
// they decode to from either wire.
func ApplyRevisionParams(r Revision) map[string]any {
	tools := make(map[string]any, len(r.Tools))
	for name, sha := range r.Tools {
		tools[name] = sha
	}
	return map[string]any{"rollout": r.Rollout, "revision": int64(r.Number), "tools": tools}
}

// ParseApplyRevision decodes apply_revision's parameters.
func ParseApplyRevision(params map[string]any) (Revision, error) {
	var r Revision
	name, ok := params["rollout"].(string)
	if !ok || name == "" {
		return r, errors.New(`parameter "rollout": missing or not a non-empty string`)
	}
	n, ok := wholeNumber(params["revision"])
	if !ok || n < 1 {
		return r, fmt.Errorf(`parameter "revision": %v is not a whole number from 1`, params["revision"])
	}
	tools, ok := params["tools"].(map[string]any)
	if !ok {
		return r, errors.New(`parameter "tools": missing or not an object`)
	}
	r = Revision{Rollout: name, Number: n, Tools: make(map[string]string, len(tools))}
	for tool, v := range tools {
		sha, ok := v.(string)
		if !ok || !moduleDigest.MatchString(sha) {
			return Revision{}, fmt.Errorf(`parameter "tools": tool %q: %v is not a module's hex SHA-256`, tool, v)
		}
		r.Tools[tool] = sha
	}
	return r, nil
}

// wholeNumber reads an integer as either wire decodes it (int64), as
// encoding/json does (float64), or as Go code builds it (int).
func wholeNumber(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), n >= math.MinInt && n <= math.MaxInt
	case uint64:
		return int(n), n <= math.MaxInt
	case float64:
		return int(n), n == math.Trunc(n) && math.Abs(n) < 1<<53
	}
	return 0, false
}

// RolloutReport is what a device reports of one rollout at registration:
// its current revision and tools, the revision it replaced (0: none),
// whose modules it keeps for a rollback, and the tools deployed by hand,
// with force, in place of the rollout's (drift).
type RolloutReport struct {
	Revision         int               `json:"revision"`
	Tools            map[string]string `json:"tools"`
	PreviousRevision int               `json:"previous_revision"`
	Overrides        map[string]string `json:"overrides"`
}

// AddRolloutMetadata puts a device's rollouts and the SHA-256 of the
// modules it keeps (sorted) into custom, a SystemInfo's CustomMetadata, as
// plain values that either wire carries.
func AddRolloutMetadata(custom map[string]any, rollouts map[string]RolloutReport, modules []string) {
	reports := make(map[string]any, len(rollouts))
	for name, r := range rollouts {
		reports[name] = map[string]any{
			"revision":          int64(r.Revision),
			"tools":             stringMap(r.Tools),
			"previous_revision": int64(r.PreviousRevision),
			"overrides":         stringMap(r.Overrides),
		}
	}
	list := make([]any, len(modules))
	for i, sha := range slices.Sorted(slices.Values(modules)) {
		list[i] = sha
	}
	custom[RolloutsMetadataKey] = reports
	custom[ModulesMetadataKey] = list
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// RolloutsFromMetadata reads what AddRolloutMetadata put into a
// registration's custom_metadata, as it decodes from either wire or from
// JSON kept in a store. An entry that does not decode is left out: a
// device that reports nothing readable of a rollout has nothing of it.
func RolloutsFromMetadata(custom map[string]any) (map[string]RolloutReport, []string) {
	rollouts := map[string]RolloutReport{}
	if entries, ok := custom[RolloutsMetadataKey].(map[string]any); ok {
		for name, v := range entries {
			var r RolloutReport
			if decodeVia(v, &r) == nil {
				rollouts[name] = r
			}
		}
	}
	var listed, modules []string
	if decodeVia(custom[ModulesMetadataKey], &listed) == nil {
		for _, sha := range listed {
			if moduleDigest.MatchString(sha) {
				modules = append(modules, sha)
			}
		}
	}
	slices.Sort(modules)
	return rollouts, modules
}

// decodeVia decodes the free-form value v into out through JSON, which
// takes its numbers whether they decoded as int64 or as float64.
func decodeVia(v any, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
