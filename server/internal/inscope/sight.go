package inscope

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/plan"
)

// Withheld stands, in what a caller is shown, for what a tool outside its
// tool patterns was given or returned, and for an error of such a tool,
// which may echo either.
const Withheld = "withheld: the tool is outside your scope"

// Sight is what one caller may see of one task: every step, its state and
// its timing; and what each call was given and returned, and why it
// failed, only for the tools the caller's patterns allow. A call's tool
// is known by its name and type: the type its plan or command gave, or it
// was sent with, else the one the device lists it under, found as the
// agent finds it (dispatch.FindTool), as admission holds calls to the
// patterns; a tool of no known type is allowed only by a pattern for any
// type. A nil
// Sight, a caller's without tool patterns, sees everything.
type Sight struct {
	tools *toolJudge
	kind  string
	// deviceID is the task's; empty for a fleet, whose events name
	// their devices.
	deviceID string
	// calls are the task's steps' calls, from its plan, or, for a single
	// command, from its recorded command: reread reads that again while
	// there is none.
	calls  [][]call
	reread func() ([][]call, error)
}

// call is a tool call as a plan or command asked for it.
type call struct {
	namespace, name string
	toolType        protocol.ToolType
}

// Sight is what c may see of the task row, one c may see (Row says so).
// A single command's calls are read from the store.
func (k *Checker) Sight(ctx context.Context, c *identity.Caller, row store.Session) (*Sight, error) {
	if len(c.Scope.Tools) == 0 {
		return nil, nil
	}
	s := &Sight{tools: k.toolJudge(c.Scope), kind: row.Kind, deviceID: row.DeviceID}
	if row.Kind == api.KindCommand {
		s.reread = func() ([][]call, error) { return k.commandCalls(ctx, row.ID) }
		var err error
		s.calls, err = s.reread()
		return s, err
	}
	p, err := plan.Parse(row.Plan)
	if err != nil {
		return nil, fmt.Errorf("task %q: its plan: %w", row.ID, err)
	}
	for _, st := range p.Steps {
		var calls []call
		for _, a := range st.Batch() {
			ns, name := a.Ref()
			calls = append(calls, call{namespace: ns, name: name, toolType: a.ToolType})
		}
		s.calls = append(s.calls, calls)
	}
	if row.Kind == api.KindPlan {
		err = k.typeAsSent(ctx, row.ID, s.calls)
	}
	return s, err
}

// typeAsSent gives each call of plan task id that names no type the type
// its step's commands were sent with, if they named one: the type
// admission pinned for a scoped requester, or found for a device that
// needs it, which the device's inventory may no longer say.
func (k *Checker) typeAsSent(ctx context.Context, id string, calls [][]call) error {
	cmds, err := k.tasks.Commands(ctx, id)
	if err != nil {
		return fmt.Errorf("task %q: its commands: %w", id, err)
	}
	for _, c := range cmds {
		if c.Step < 0 || c.Step >= len(calls) {
			continue
		}
		for i, a := range c.Actions {
			if i < len(calls[c.Step]) && calls[c.Step][i].toolType == "" {
				calls[c.Step][i].toolType = a.ToolType
			}
		}
	}
	return nil
}

// TaskSight is Sight for task id, whose row is read only for a caller
// with tool patterns.
func (k *Checker) TaskSight(ctx context.Context, c *identity.Caller, id string) (*Sight, error) {
	if len(c.Scope.Tools) == 0 {
		return nil, nil
	}
	row, err := k.tasks.Task(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("task %q: %w", id, err)
	}
	return k.Sight(ctx, c, row)
}

// commandCalls are the calls of single command task id, as its command
// was recorded; none before it is.
func (k *Checker) commandCalls(ctx context.Context, id string) ([][]call, error) {
	cmds, err := k.tasks.Commands(ctx, id)
	if err != nil || len(cmds) == 0 {
		return nil, err
	}
	calls := make([]call, len(cmds[0].Actions))
	for i, a := range cmds[0].Actions {
		calls[i] = call{name: a.ToolName, toolType: a.ToolType}
	}
	return [][]call{calls}, nil
}

// hides reports whether call i of step on deviceID is outside the
// patterns; a call the sight does not know is.
func (s *Sight) hides(deviceID string, step, i int) bool {
	if step >= len(s.calls) && s.reread != nil {
		if calls, err := s.reread(); err == nil {
			s.calls = calls
		}
	}
	if step < 0 || step >= len(s.calls) || i < 0 || i >= len(s.calls[step]) {
		return true
	}
	c := s.calls[step][i]
	return !s.tools.allows(deviceID, c.namespace, c.name, c.toolType)
}

// stepHides reports whether any call of step on deviceID is hidden.
func (s *Sight) stepHides(deviceID string, step int) bool {
	n := 1
	if step >= 0 && step < len(s.calls) {
		n = len(s.calls[step])
	}
	for i := range n {
		if s.hides(deviceID, step, i) {
			return true
		}
	}
	return false
}

// anyHides reports whether any call of the task on deviceID is hidden.
func (s *Sight) anyHides(deviceID string) bool {
	for step := range max(len(s.calls), 1) {
		if s.stepHides(deviceID, step) {
			return true
		}
	}
	return false
}

// Task is t as the sight shows it: its plan without the parameters of
// hidden calls, its result and commands without their results, and its
// error withheld if a hidden call's failure may be in it.
func (s *Sight) Task(t api.Task) api.Task {
	if s == nil {
		return t
	}
	t.Plan = s.plan(t.Plan)
	t.Error = s.taskError(t.DeviceID, t.Result, t.Error)
	t.Result = s.Result(t.DeviceID, t.Result)
	cmds := make([]api.CommandRecord, len(t.Commands))
	for i, c := range t.Commands {
		c.Results = s.results(t.DeviceID, c.Step, c.Results)
		cmds[i] = c
	}
	if t.Commands != nil {
		t.Commands = cmds
	}
	return t
}

// plan is the task's plan, as the API shows it, without the parameters
// of hidden calls. A plan that does not read is not shown.
func (s *Sight) plan(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	p, err := plan.Parse(raw)
	if err != nil {
		return nil
	}
	for i := range p.Steps {
		st := &p.Steps[i]
		if len(st.Actions) == 0 && s.hides(s.deviceID, i, 0) {
			st.Parameters = nil
		}
		for j := range st.Actions {
			if s.hides(s.deviceID, i, j) {
				st.Actions[j].Parameters = nil
			}
		}
	}
	return marshal(p)
}

// Result is a task's result on deviceID as the sight shows it: a
// plan's (api.PlanResult) or a single command's (api.CommandResponse)
// without the results and errors of hidden calls, a fleet's
// (api.FleetResult) without the error of a device whose plan hides a
// call. A result that does not read is not shown.
func (s *Sight) Result(deviceID string, raw json.RawMessage) json.RawMessage {
	if s == nil || len(raw) == 0 {
		return raw
	}
	switch s.kind {
	case api.KindCommand:
		var r api.CommandResponse
		if json.Unmarshal(raw, &r) != nil {
			return nil
		}
		r.Results = s.results(deviceID, 0, r.Results)
		return marshal(r)
	case api.KindFleet:
		var r api.FleetResult
		if json.Unmarshal(raw, &r) != nil {
			return nil
		}
		r.Devices = append([]api.FleetDevice(nil), r.Devices...)
		for i, d := range r.Devices {
			r.Devices[i].Error = s.deviceError(d.DeviceID, d.Error)
		}
		return marshal(r)
	}
	var r api.PlanResult
	if json.Unmarshal(raw, &r) != nil {
		return nil
	}
	return marshal(s.PlanResult(deviceID, r))
}

// PlanResult is a plan's result on deviceID without the results of
// hidden calls, and the error of a step that has one.
func (s *Sight) PlanResult(deviceID string, r api.PlanResult) api.PlanResult {
	if s == nil {
		return r
	}
	steps := make([]api.StepResult, len(r.Steps))
	for i, st := range r.Steps {
		st.Results = s.results(deviceID, st.Step, st.Results)
		if st.Error != "" && s.stepHides(deviceID, st.Step) {
			st.Error = Withheld
		}
		steps[i] = st
	}
	r.Steps = steps
	return r
}

// PlanEnd is how a plan on deviceID ended, its result r and error err, as
// the sight shows them: for a TASK_END.
func (s *Sight) PlanEnd(deviceID string, r api.PlanResult, err string) (api.PlanResult, string) {
	if s == nil {
		return r, err
	}
	return s.PlanResult(deviceID, r), s.taskError(deviceID, marshal(r), err)
}

// taskError is err, the error of a task on deviceID whose result is raw,
// or Withheld if it may be a hidden call's: a plan's error names the step
// that failed first, a single command's is its first failed call's. A
// fleet's own error counts devices.
func (s *Sight) taskError(deviceID string, raw json.RawMessage, err string) string {
	if err == "" || s.kind == api.KindFleet {
		return err
	}
	if s.kind == api.KindCommand {
		var r api.CommandResponse
		if json.Unmarshal(raw, &r) != nil {
			return Withheld
		}
		for j, res := range r.Results {
			if res.Status != protocol.ResultSuccess && s.hides(deviceID, 0, j) {
				return Withheld
			}
		}
		return err
	}
	var r api.PlanResult
	if json.Unmarshal(raw, &r) != nil {
		return s.deviceError(deviceID, err)
	}
	for _, st := range r.Steps {
		if st.Error != "" && s.stepHides(deviceID, st.Step) {
			return Withheld
		}
	}
	return err
}

// deviceError is err, the error of the plan on deviceID, or Withheld if
// the plan hides any call there.
func (s *Sight) deviceError(deviceID, err string) string {
	if err != "" && s.anyHides(deviceID) {
		return Withheld
	}
	return err
}

// results are rs, the results of step's calls on deviceID, with those of
// hidden calls withheld: their status, call id and namespace stay.
func (s *Sight) results(deviceID string, step int, rs []protocol.Result) []protocol.Result {
	if rs == nil {
		return nil
	}
	out := make([]protocol.Result, len(rs))
	for i, r := range rs {
		if s.hides(deviceID, step, i) {
			r = withheldResult(r)
		}
		out[i] = r
	}
	return out
}

func withheldResult(r protocol.Result) protocol.Result {
	w := protocol.Result{Status: r.Status, Namespace: r.Namespace, CallID: r.CallID}
	if r.Result != nil {
		w.Result = Withheld
	}
	if r.Error != "" {
		w.Error = Withheld
	}
	return w
}

// Event is e, an event of the task, as the sight shows it.
func (s *Sight) Event(e api.TaskEvent) api.TaskEvent {
	if s == nil {
		return e
	}
	switch e.Type {
	case api.EventPreparing:
		if e.Preparing != nil && e.Step != nil && s.stepHides(e.DeviceID, *e.Step) {
			p := *e.Preparing
			p.ToolName = Withheld
			e.Preparing = &p
		}
	case api.EventStepEnd:
		step := -1
		if e.Step != nil {
			step = *e.Step
		}
		e.Results = s.results(e.DeviceID, step, e.Results)
		if e.Error != "" && s.stepHides(e.DeviceID, step) {
			e.Error = Withheld
		}
	case api.EventDeviceEnd:
		e.Error = s.deviceError(e.DeviceID, e.Error)
	case api.EventEnd:
		var raw json.RawMessage
		if e.Result != nil {
			raw = marshal(e.Result)
		}
		e.Error = s.taskError(e.DeviceID, raw, e.Error)
		if raw != nil {
			e.Result = s.Result(e.DeviceID, raw)
		}
	}
	return e
}

// Audit is entries as c may see them: a tool call's parameters and error
// withheld if its tool is outside c's patterns. Changes (an Action) are
// shown whole.
func (k *Checker) Audit(c *identity.Caller, entries []api.AuditEntry) []api.AuditEntry {
	if len(c.Scope.Tools) == 0 {
		return entries
	}
	tools := k.toolJudge(c.Scope)
	out := make([]api.AuditEntry, len(entries))
	for i, e := range entries {
		typ, name, typed := strings.Cut(e.Tool, "::")
		if !typed {
			typ, name = "", e.Tool
		}
		if e.Action == "" && !tools.allows(e.DeviceID, e.Namespace, name, protocol.ToolType(typ)) {
			e.Parameters = marshal(Withheld)
			if e.Error != "" {
				e.Error = Withheld
			}
		}
		out[i] = e
	}
	return out
}

// toolJudge holds calls to scope's tool patterns, finding a call's type,
// when it names none, in its device's inventory, each read once.
type toolJudge struct {
	scope     access.Scope
	disp      *dispatch.Dispatcher
	inventory map[string][]protocol.MCPToolInfo
}

func (k *Checker) toolJudge(scope access.Scope) *toolJudge {
	return &toolJudge{scope: scope, disp: k.disp, inventory: map[string][]protocol.MCPToolInfo{}}
}

// allows reports whether the scope allows the tool a call on deviceID
// names. install_tool is no tool of the patterns, as admission holds it
// (its role, and the tool it installs, are admission's to check): what it
// was given and returned, a module and the tool it installed, is shown.
func (j *toolJudge) allows(deviceID, namespace, name string, typ protocol.ToolType) bool {
	if name == protocol.InstallToolName {
		return true
	}
	if typ == "" && deviceID != "" {
		inv, ok := j.inventory[deviceID]
		if !ok {
			inv = j.disp.Tools(deviceID).Tools
			j.inventory[deviceID] = inv
		}
		if t, found := dispatch.FindTool(inv, namespace, name, ""); found {
			typ = t.ToolType
		}
	}
	return j.scope.Tool(string(typ), name)
}

// marshal is v as JSON; the API's types always encode.
func marshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
