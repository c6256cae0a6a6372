package plan

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const designExample = `
task_name: restart-kiosk-page
early_exit: true
steps:
  - tool: browser.browser_navigate     # namespace.tool, or tool_name + tool_type
    parameters: {url: "http://localhost:8080/"}
    timeout: 20s
    retries: 1
  - tool: hash_file
    parameters: {path: /data/kiosk/config.json}
`

func TestParseReadsTheDesignExample(t *testing.T) {
	p, err := Parse([]byte(designExample))
	require.NoError(t, err)
	assert.Equal(t, "restart-kiosk-page", p.TaskName)
	require.Len(t, p.Steps, 2)

	s := p.Steps[0]
	ns, name := s.Action.Ref()
	assert.Equal(t, "browser", ns)
	assert.Equal(t, "browser_navigate", name)
	assert.Equal(t, Parameters{"url": "http://localhost:8080/"}, s.Parameters)
	assert.Equal(t, 20*time.Second, s.TimeoutOrDefault())
	assert.Equal(t, 1, s.Retries)

	ns, name = p.Steps[1].Action.Ref()
	assert.Equal(t, "", ns)
	assert.Equal(t, "hash_file", name)
	assert.Equal(t, DefaultTimeout, p.Steps[1].TimeoutOrDefault())
	assert.True(t, p.StopsOnFailure(1))
}

func TestJSONFormParsesBackToTheSamePlan(t *testing.T) {
	p, err := Parse([]byte(designExample))
	require.NoError(t, err)
	b, err := json.Marshal(p)
	require.NoError(t, err)
	again, err := Parse(b)
	require.NoError(t, err, string(b))
	assert.Equal(t, p, again)
}

func TestBatchesToolNamesAndEarlyExit(t *testing.T) {
	p, err := Parse([]byte(`{
		"early_exit": false,
		"steps": [
			{"actions": [{"tool": "read_file", "parameters": {"path": "/a"}}, {"tool_name": "my.dotted.tool", "tool_type": "action"}]},
			{"tool": "echo", "early_exit": true, "backoff": "100ms", "retries": 3}
		]}`))
	require.NoError(t, err)
	batch := p.Steps[0].Batch()
	require.Len(t, batch, 2)
	ns, name := batch[1].Ref()
	assert.Equal(t, "", ns, "tool_name is taken literally")
	assert.Equal(t, "my.dotted.tool", name)
	assert.Equal(t, protocol.ToolAction, batch[1].ToolType)
	assert.Equal(t, "read_file+my.dotted.tool", p.Steps[0].Label())
	assert.False(t, p.StopsOnFailure(0), "the plan's early_exit")
	assert.True(t, p.StopsOnFailure(1), "the step's own early_exit")

	s := p.Steps[1]
	assert.Equal(t, 100*time.Millisecond, s.RetryWait(1))
	assert.Equal(t, 200*time.Millisecond, s.RetryWait(2))
	assert.Equal(t, 400*time.Millisecond, s.RetryWait(3))
	assert.Equal(t, MaxBackoff, (Step{Backoff: Duration(20 * time.Second)}).RetryWait(5), "backoff is capped")
}

func TestYAMLTimestampsAndBinaryInParametersStayTheTextWritten(t *testing.T) {
	p, err := Parse([]byte(`
steps:
  - tool: write_file
    parameters:
      content: 2024-01-01
      at: 2024-01-01T10:00:00Z
      tagged: !!timestamp 2001-12-14
      blob: !!binary aGk=
      nested: {days: [2024-01-02], 2024-01-03: key, anchored: &d 2024-01-04, again: *d}
      count: 5
`))
	require.NoError(t, err)
	params := p.Steps[0].Parameters
	nested := map[string]any{"days": []any{"2024-01-02"}, "2024-01-03": "key", "anchored": "2024-01-04", "again": "2024-01-04"}
	assert.Equal(t, Parameters{"content": "2024-01-01", "at": "2024-01-01T10:00:00Z", "tagged": "2001-12-14", "blob": "aGk=",
		"count": 5, "nested": nested}, params)

	// What a CBOR device is sent: a text string of 10 bytes (0x6a), not
	// a tagged epoch number.
	b, err := protocol.CBOR.Marshal(&protocol.ServerMessage{Type: protocol.ServerCommand, Status: protocol.StatusContinue,
		Actions: []protocol.Command{{ToolName: "write_file", Parameters: params}}})
	require.NoError(t, err)
	assert.Contains(t, string(b), "\x6a2024-01-01")
	b, err = json.Marshal(params)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"content":"2024-01-01"`, "what is stored and audited")
}

func TestParseRefusesBadPlansNamingTheField(t *testing.T) {
	for name, tc := range map[string]struct{ doc, want string }{
		"empty":              {"", "empty document"},
		"no steps":           {"task_name: x", `steps: at least one step is required`},
		"unknown field":      {"steps: [{tool: a, timout: 3s}]", "line 1, column 19: steps[0].timout: unknown key; did you mean timeout?"},
		"duplicate key":      {"steps: [{tool: a, tool: b}]", `line 1, column 19: steps[0].tool: given twice`},
		"traversal name":     {"task_name: ../etc\nsteps: [{tool: a}]", `line 1, column 1: task_name: "../etc": want`},
		"dot name":           {"task_name: .hidden\nsteps: [{tool: a}]", `task_name: ".hidden"`},
		"no action":          {"steps: [{timeout: 3s}]", "line 1, column 9: steps[0]: no action"},
		"both forms":         {"steps: [{tool: a, actions: [{tool: b}]}]", "steps[0]: give either one action inline"},
		"tool and tool_name": {"steps: [{tool: a, tool_name: b}]", `steps[0]: give either "tool" or "tool_name"`},
		"bad tool type":      {"steps: [{tool: a, tool_type: magic}]", `steps[0].tool_type: "magic": want action or data_collection`},
		"empty namespace":    {"steps: [{tool: .a}]", `steps[0].tool: ".a"`},
		"empty name":         {"steps: [{tool: 'ns.'}]", `steps[0].tool: "ns."`},
		"numeric timeout":    {"steps: [{tool: a, timeout: 20}]", `line 1, column 28: steps[0].timeout: want a duration such as "20s" or "1m30s", got "20"`},
		"bad timeout":        {"steps: [{tool: a, timeout: soon}]", `want a duration such as "20s" or "1m30s", got "soon"`},
		"huge timeout":       {"steps: [{tool: a, timeout: 48h}]", `steps[0].timeout: 48h0m0s is outside`},
		"negative retries":   {"steps: [{tool: a, retries: -1}]", `steps[0].retries: -1`},
		"too many retries":   {"steps: [{tool: a, retries: 11}]", `steps[0].retries: 11`},
		"batch item":         {"steps: [{actions: [{tool: a}, {parameters: {}}]}]", `steps[0].actions[1].tool: missing`},
		"non-string keys":    {"steps: [{tool: a, parameters: {x: {1: 2}}}]", "not representable as JSON"},
		"two documents":      {"steps: [{tool: a}]\n---\nsteps: [{tool: b}]", "more than one document"},
	} {
		_, err := Parse([]byte(tc.doc))
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name)
	}
}

func TestValidTaskName(t *testing.T) {
	for _, ok := range []string{"a", "restart-kiosk.page_2", "A.b.c"} {
		assert.True(t, ValidTaskName(ok), ok)
	}
	for _, bad := range []string{"", ".", "..", "../x", "a/b", `a\b`, ".env", "a b", "é", string(make([]byte, 129))} {
		assert.False(t, ValidTaskName(bad), bad)
	}
}

// aliasBomb is a plan of about 300 KB whose aliases expand it a
// hundredfold, within yaml.v3's own "excessive aliasing" limit.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("steps:\n  - tool: echo\n    parameters:\n      a: &x \"")
	b.WriteString(strings.Repeat("x", 300_000))
	b.WriteString("\"\n      b: [")
	for i := range 100 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("*x")
	}
	b.WriteString("]\n")
	return b.String()
}

func TestAPlanWhoseAliasesExpandPastTheLimitIsRefusedWithBothFigures(t *testing.T) {
	doc := aliasBomb()
	require.Less(t, len(doc), MaxBytes)
	_, err := Parse([]byte(doc))
	var big *ExpandedError
	require.ErrorAs(t, err, &big)
	assert.Equal(t, DefaultMaxExpandedBytes, big.Limit)
	assert.Greater(t, big.Size, 100*300_000, "at least the hundred copies")
	assert.Regexp(t, `^plan: its YAML aliases expand it to at least \d+ bytes as JSON, more than the limit of 1048576$`, err.Error())

	p, err := ParseWithin([]byte(doc), 64<<20)
	require.NoError(t, err, "a higher limit takes it")
	b, err := json.Marshal(p)
	require.NoError(t, err)
	assert.LessOrEqual(t, big.Size, len(b), "the figure is a lower bound of the plan's JSON")
}

// The measure is a lower bound of the JSON, whatever the YAML holds, so
// that no plan is refused for a size it does not have.
func TestTheExpandedSizeIsALowerBoundOfTheJSON(t *testing.T) {
	for _, doc := range []string{
		designExample,
		`{"steps": [{"tool": "a", "parameters": {"n": 1, "f": 0.5, "t": true, "z": null, "l": [1, "two", {"three": []}]}}]}`,
		"steps:\n  - tool: a\n    parameters: &p {k: 0x10, e: '', s: \"quote\\\"d\"}\n  - tool: b\n    parameters: *p\n",
		"steps:\n  - tool: a\n    parameters:\n      base: &b {x: 1, y: 2}\n      merged: {<<: *b, x: 3}\n",
		"steps: [{tool: a, parameters: {when: 2024-01-01, blob: !!binary aGk=, n: ~}}]",
	} {
		var n yaml.Node
		require.NoError(t, yaml.Unmarshal([]byte(doc), &n), doc)
		var v any
		require.NoError(t, yaml.Unmarshal([]byte(doc), &v), doc)
		b, err := json.Marshal(v)
		require.NoError(t, err, doc)
		size := expandedSize(&n, map[*yaml.Node]int{})
		assert.LessOrEqual(t, size, len(b), "%s\nas JSON: %s", doc, b)
		assert.Greater(t, size, len(b)/3, "%s\nas JSON: %s", doc, b)
	}
}

// SanitizeTaskName is UFO's sanitize_task_name: each character outside
// [A-Za-z0-9._-] becomes '_', then leading dots go; cut to 128 here.
func TestSanitizeTaskNameIsUFOs(t *testing.T) {
	for in, want := range map[string]string{
		"galaxy/task_1/t1":        "galaxy_task_1_t1",
		"restart-kiosk.page":      "restart-kiosk.page",
		"../../etc/passwd":        "_.._etc_passwd",
		"..hidden":                "hidden",
		"._x":                     "_x",
		"...":                     "",
		"":                        "",
		"a b\tc":                  "a_b_c",
		"café ✓":                  "caf___",
		`a\b:c*d`:                 "a_b_c_d",
		strings.Repeat("ab/", 60): strings.Repeat("ab_", 42) + "ab",
	} {
		got := SanitizeTaskName(in)
		assert.Equal(t, want, got, in)
		assert.True(t, got == "" || ValidTaskName(got), "%q sanitizes to a valid name, %q", in, got)
	}
}

// Item 2 of issue 24: a plan's problems say where they are, by line,
// column and key path, in the plan's words: no Go type, no field of the
// request that carried it.
func TestParseLocatesEachProblemInThePlansWords(t *testing.T) {
	for name, tc := range map[string]struct {
		doc  string
		want []Problem
	}{
		"an unclosed { on line 4": {"task_name: x\nsteps:\n  - tool: a\n    parameters: {path: /x\n  - tool: b\n",
			[]Problem{{Line: 4, Column: 17, Problem: `this "{" is not closed: a "}", or a "," between its entries, is missing`}}},
		"an unclosed [": {"steps:\n  - tool: a\n    parameters: {list: [1, 2}\n",
			[]Problem{{Line: 3, Column: 24, Problem: `this "[" is not closed: a "]", or a "," between its items, is missing`}}},
		"a line indented wrong": {"steps:\n  - tool: a\n   parameters: {}\n",
			[]Problem{{Line: 3, Column: 4, Problem: `this line is indented as if it went on with the list above, but it does not start a new item with "- " nor line up with its item's keys`}}},
		"a tab":             {"steps:\n\t- tool: a\n", []Problem{{Line: 2, Column: 1, Problem: "a tab: YAML indents with spaces only"}}},
		"an unclosed quote": {"steps:\n  - tool: a\n    parameters: {path: 'x}\n", []Problem{{Line: 3, Column: 24, Problem: "this quote is not closed"}}},
		"misspelt keys, all of them": {"steps:\n  - tool: a\n    paramters: {path: 1}\n  - tool: b\n    retries: many\n    timout: 1s\n",
			[]Problem{
				{Line: 3, Column: 5, Path: "steps[0].paramters", Problem: "unknown key; did you mean parameters?"},
				{Line: 5, Column: 14, Path: "steps[1].retries", Problem: `want a whole number, got "many"`},
				{Line: 6, Column: 5, Path: "steps[1].timout", Problem: "unknown key; did you mean timeout?"},
			}},
		"not a plan":             {`{"request": "x"}`, []Problem{{Line: 1, Column: 2, Path: "request", Problem: "unknown key"}}},
		"steps that are no list": {"steps: 3\n", []Problem{{Line: 1, Column: 8, Path: "steps", Problem: `want a list of steps, got "3"`}}},
		"a step that is no mapping": {"steps:\n  - hash_file\n", []Problem{{Line: 2, Column: 5, Path: "steps[0]",
			Problem: `want a step: a mapping with tool and parameters, or actions, got "hash_file"`}}},
		"bounds, located": {"steps:\n  - tool: a\n    retries: 20\n", []Problem{{Line: 3, Column: 5, Path: "steps[0].retries", Problem: "20 is outside [0, 10]"}}},
	} {
		_, err := Parse([]byte(tc.doc))
		var e *Error
		require.ErrorAs(t, err, &e, name)
		assert.Equal(t, tc.want, e.Problems, name)
		assert.NotRegexp(t, `plan\.|\[\]|!!|unmarshal`, err.Error(), "%s: no Go or YAML internals", name)
	}
}
