// Package plan is the model and parser of edgeaip plans: a task name, a list
// of steps, and whether the plan stops at the first failed step. Each step
// is one COMMAND to a device: one action, or a batch of actions, with its
// own timeout and retries.
//
// Plans are written in YAML or JSON (JSON is read as YAML, which it is):
//
//	task_name: restart-kiosk-page
//	early_exit: true
//	steps:
//	  - tool: browser.browser_navigate    # namespace.tool
//	    parameters: {url: "http://localhost:8080/"}
//	    timeout: 20s
//	    retries: 1
//	  - tool_name: hash_file              # or tool_name, with tool_type
//	    tool_type: data_collection
//	    parameters: {path: /data/kiosk/config.json}
//	  - actions:                          # a batch: one COMMAND, run in order
//	      - {tool: read_file, parameters: {path: /etc/hostname}}
//	      - {tool: list_dir, parameters: {path: /data}}
//
// Parsing is strict: unknown fields, duplicate keys and values out of range
// are errors that name the step and field at fault. The package has no
// server dependencies, so aipctl can validate a plan before sending it.
package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"gopkg.in/yaml.v3"
)

// Defaults and bounds of a step.
const (
	DefaultTimeout = 30 * time.Second
	DefaultBackoff = 500 * time.Millisecond
	MaxBackoff     = 30 * time.Second
	MaxTimeout     = 24 * time.Hour
	MaxRetries     = 10
	MaxSteps       = 1000
	MaxActions     = 100
)

// Plan is a task for one device.
type Plan struct {
	// TaskName names the task, e.g. for GET /api/task_result/{task_name}.
	// Optional: a dispatch may name it instead, or the server makes one.
	TaskName string `yaml:"task_name" json:"task_name,omitempty"`
	// EarlyExit stops the plan at the first step that fails after its
	// retries; the steps after it are skipped. Default true. A step may
	// override it.
	EarlyExit *bool  `yaml:"early_exit" json:"early_exit,omitempty"`
	Steps     []Step `yaml:"steps" json:"steps"`
}

// Step is one COMMAND: a single action written inline, or a batch under
// Actions. The device runs a batch in order and skips the rest of it after
// a failure, as UFO's command layer does.
type Step struct {
	Action  `yaml:",inline"`
	Actions []Action `yaml:"actions" json:"actions,omitempty"`
	// Timeout bounds one attempt, from sending to results. Default 30 s.
	Timeout Duration `yaml:"timeout" json:"timeout,omitempty"`
	// Retries is how many more attempts a failed step gets.
	Retries int `yaml:"retries" json:"retries,omitempty"`
	// Backoff is the wait before the first retry; it doubles for each
	// further retry, up to MaxBackoff. Default 500 ms.
	Backoff Duration `yaml:"backoff" json:"backoff,omitempty"`
	// EarlyExit overrides the plan's EarlyExit for this step.
	EarlyExit *bool `yaml:"early_exit" json:"early_exit,omitempty"`
}

// Action is one tool call. Tool is "namespace.tool" or a bare tool name;
// ToolName is always taken literally (use it for names that contain a dot).
type Action struct {
	Tool       string            `yaml:"tool" json:"tool,omitempty"`
	ToolName   string            `yaml:"tool_name" json:"tool_name,omitempty"`
	ToolType   protocol.ToolType `yaml:"tool_type" json:"tool_type,omitempty"`
	Parameters Parameters        `yaml:"parameters" json:"parameters,omitempty"`
}

// Parameters are an action's arguments, in JSON's data model whichever
// way the plan was written, so that what a device is sent, what the store
// keeps and what the audit log says are the same values. YAML's own types
// stay the text written: a timestamp such as 2024-01-01 is that string
// (yaml.v3 would make it a time.Time, which CBOR sends as an epoch
// number and JSON writes as "2024-01-01T00:00:00Z"), !!binary is its
// base64 text. Other values JSON cannot hold, such as a mapping key that
// is not a string, are errors.
type Parameters map[string]any

// UnmarshalYAML reads parameters in JSON's data model.
func (p *Parameters) UnmarshalYAML(n *yaml.Node) error {
	asJSONScalars(n, map[*yaml.Node]bool{})
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return err
	}
	*p = m
	return nil
}

// asJSONScalars retags the scalars under n that JSON has no type for
// (timestamps, binary) as the strings written. seen guards against an
// alias that contains itself, which decoding then reports.
func asJSONScalars(n *yaml.Node, seen map[*yaml.Node]bool) {
	if n == nil || seen[n] {
		return
	}
	seen[n] = true
	switch n.Kind {
	case yaml.ScalarNode:
		if t := n.ShortTag(); t == "!!timestamp" || t == "!!binary" {
			n.Tag = "!!str"
		}
	case yaml.AliasNode:
		asJSONScalars(n.Alias, seen)
	default:
		for _, c := range n.Content {
			asJSONScalars(c, seen)
		}
	}
}

// Ref returns the namespace the action asks for ("" for any) and the tool
// name to send.
func (a Action) Ref() (namespace, name string) {
	if a.ToolName != "" {
		return "", a.ToolName
	}
	if ns, n, ok := strings.Cut(a.Tool, "."); ok {
		return ns, n
	}
	return "", a.Tool
}

// Label is how the action is named in results and logs: what the plan said.
func (a Action) Label() string {
	if a.Tool != "" {
		return a.Tool
	}
	return a.ToolName
}

// Batch returns the step's actions: the inline one, or the batch.
func (s Step) Batch() []Action {
	if len(s.Actions) > 0 {
		return s.Actions
	}
	return []Action{s.Action}
}

// Label names the step by its tools, e.g. "hash_file" or "read_file+list_dir".
func (s Step) Label() string {
	var names []string
	for _, a := range s.Batch() {
		names = append(names, a.Label())
	}
	return strings.Join(names, "+")
}

// TimeoutOrDefault is the step's timeout, or DefaultTimeout.
func (s Step) TimeoutOrDefault() time.Duration {
	if s.Timeout > 0 {
		return time.Duration(s.Timeout)
	}
	return DefaultTimeout
}

// RetryWait is the wait before retry number n (1 for the first retry).
func (s Step) RetryWait(n int) time.Duration {
	d := time.Duration(s.Backoff)
	if d <= 0 {
		d = DefaultBackoff
	}
	for i := 1; i < n && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// StopsOnFailure reports whether the plan ends when step i fails.
func (p *Plan) StopsOnFailure(i int) bool {
	if e := p.Steps[i].EarlyExit; e != nil {
		return *e
	}
	return p.EarlyExit == nil || *p.EarlyExit
}

// Duration is a time.Duration written as a Go duration string ("20s").
type Duration time.Duration

// UnmarshalYAML reads a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" || n.Decode(&s) != nil {
		return fmt.Errorf("line %d: want a duration string such as \"20s\", got %q", n.Line, n.Value)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a string, so that the JSON form of a
// plan parses back to the same plan.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// MaxBytes caps the size of a plan document.
const MaxBytes = 1 << 20

// DefaultMaxExpandedBytes is Parse's bound on a plan's size once its YAML
// aliases are expanded: a document of MaxBytes can otherwise expand a
// hundredfold within yaml.v3's own "excessive aliasing" limit.
const DefaultMaxExpandedBytes = 1 << 20

// ExpandedError refuses a plan whose YAML aliases expand it to more than
// Limit bytes: it is at least Size bytes as JSON.
type ExpandedError struct {
	Size, Limit int
}

func (e *ExpandedError) Error() string {
	return fmt.Sprintf("plan: its YAML aliases expand it to at least %d bytes as JSON, more than the limit of %d", e.Size, e.Limit)
}

// Parse reads a plan from YAML or JSON and validates it; its aliases may
// expand it to at most DefaultMaxExpandedBytes.
func Parse(data []byte) (*Plan, error) { return ParseWithin(data, DefaultMaxExpandedBytes) }

// ParseWithin reads a plan from YAML or JSON and validates it. A plan
// whose aliases expand it past maxExpanded bytes (as JSON, a lower bound
// measured on the YAML before it is expanded) is refused with an
// *ExpandedError before it takes that memory. Any other plan that is
// wrong is refused with an *Error that lists its problems, each with its
// line, column and key path.
func ParseWithin(data []byte, maxExpanded int) (*Plan, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("plan: %d bytes is more than the limit of %d", len(data), MaxBytes)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("plan: empty document")
	}
	doc, err := parseNode(bytes.NewReader(data))
	switch {
	case errors.Is(err, errMore):
		return nil, errors.New("plan: more than one document")
	case err != nil:
		return nil, syntaxProblem(err, data)
	}
	if err := CheckExpanded(doc, maxExpanded); err != nil {
		return nil, err
	}
	s := shape{at: map[string]*yaml.Node{}}
	if len(doc.Content) == 1 {
		s.mapping(doc.Content[0], "", planKeys, "a plan: a mapping with task_name and steps")
	}
	if len(s.problems) > 0 {
		return nil, &Error{Problems: s.problems}
	}
	var p Plan
	if err := decodeStrict(doc, &p); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	if problems := p.problems(); len(problems) > 0 {
		for i := range problems {
			problems[i] = s.locate(problems[i])
		}
		return nil, &Error{Problems: problems}
	}
	return &p, nil
}

// decodeStrict decodes doc into p. shape has refused what it can, so what
// is left to fail here (a mapping key in the parameters that is not text,
// an alias that contains itself) is rare.
func decodeStrict(doc *yaml.Node, p *Plan) error {
	return doc.Decode(p)
}

// taskNameRe is UFO's rule for task names, which end up in paths: only
// [A-Za-z0-9._-], and not starting with '.'.
var taskNameRe = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$`)

// ValidTaskName reports whether name is a safe task name: 1 to 128 of
// [A-Za-z0-9._-], not starting with '.'.
func ValidTaskName(name string) bool { return taskNameRe.MatchString(name) }

// maxTaskName is the longest task name ValidTaskName accepts.
const maxTaskName = 128

// SanitizeTaskName makes name a valid task name the way UFO's server does
// (ufo.utils.sanitize_task_name): every character outside [A-Za-z0-9._-]
// becomes '_', and leading dots go. UFO keeps any length; a name is cut
// here to the 128 characters ValidTaskName allows. It returns "" when
// nothing is left, for the caller to pick a name, as UFO picks a fresh
// UUID.
func SanitizeTaskName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if b.Len() == maxTaskName {
			break
		}
		switch {
		case r == '.' && b.Len() == 0:
		case taskNameChar(r):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// taskNameChar reports whether r may appear in a task name.
func taskNameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// Validate checks the plan's shape and bounds, and returns an *Error
// with every problem, each with its key path, if it is wrong.
func (p *Plan) Validate() error {
	if problems := p.problems(); len(problems) > 0 {
		return &Error{Problems: problems}
	}
	return nil
}

// problems lists what is wrong with the plan, each with its key path.
func (p *Plan) problems() []Problem {
	var ps []Problem
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Problem: fmt.Sprintf(format, args...)})
	}
	if p.TaskName != "" && !ValidTaskName(p.TaskName) {
		add("task_name", "%q: want 1-128 of [A-Za-z0-9._-], not starting with '.'", p.TaskName)
	}
	switch {
	case len(p.Steps) == 0:
		add("steps", "at least one step is required")
	case len(p.Steps) > MaxSteps:
		add("steps", "%d steps is more than the limit of %d", len(p.Steps), MaxSteps)
	}
	for i := range p.Steps {
		p.Steps[i].check(fmt.Sprintf("steps[%d]", i), add)
	}
	return ps
}

func (s *Step) check(path string, add func(path, format string, args ...any)) {
	inline := s.Action.Tool != "" || s.Action.ToolName != "" || s.Action.ToolType != "" || s.Action.Parameters != nil
	switch {
	case inline && len(s.Actions) > 0:
		add(path, "give either one action inline or \"actions\", not both")
	case !inline && len(s.Actions) == 0:
		add(path, "no action: give \"tool\", \"tool_name\" or \"actions\"")
	case len(s.Actions) > MaxActions:
		add(path+".actions", "%d actions is more than the limit of %d", len(s.Actions), MaxActions)
	}
	if s.Timeout < 0 || time.Duration(s.Timeout) > MaxTimeout {
		add(path+".timeout", "%s is outside (0, %s]", time.Duration(s.Timeout), MaxTimeout)
	}
	if s.Retries < 0 || s.Retries > MaxRetries {
		add(path+".retries", "%d is outside [0, %d]", s.Retries, MaxRetries)
	}
	if s.Backoff < 0 || time.Duration(s.Backoff) > MaxBackoff {
		add(path+".backoff", "%s is outside [0, %s]", time.Duration(s.Backoff), MaxBackoff)
	}
	if inline {
		s.Action.check(path, add)
	}
	for i, a := range s.Actions {
		a.check(fmt.Sprintf("%s.actions[%d]", path, i), add)
	}
}

func (a Action) check(path string, add func(path, format string, args ...any)) {
	switch {
	case a.Tool != "" && a.ToolName != "":
		add(path, "give either \"tool\" or \"tool_name\", not both")
	case a.Tool == "" && a.ToolName == "":
		add(path+".tool", "missing")
	case a.ToolType != "" && !a.ToolType.Valid():
		add(path+".tool_type", "%q: want action or data_collection", a.ToolType)
	default:
		if ns, name := a.Ref(); name == "" || (a.Tool != "" && strings.Contains(a.Tool, ".") && ns == "") {
			add(path+".tool", "%q: want \"namespace.tool\" or \"tool\"", a.Tool)
		}
	}
	if _, err := json.Marshal(a.Parameters); err != nil {
		add(path+".parameters", "not representable as JSON: %v", err)
	}
}
