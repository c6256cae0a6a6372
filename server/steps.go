package server

import (
	"context"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/plan"
)

// cancelGrace is how long a cancelled session's running step may still
// finish, as UFO's cancel_task waits.
const cancelGrace = 2 * time.Second

// sessionStepper runs the steps of one session through the dispatcher.
type sessionStepper struct {
	m *sessionManager
	s *session
}

func (st sessionStepper) runStep(ctx context.Context, index int, step plan.Step) api.StepResult {
	res := api.StepResult{Step: index, Tool: step.Label(), Status: api.StepFailure}
	for attempt := 1; ; attempt++ {
		if attempt > 1 && !sleep(ctx, step.RetryWait(attempt-1)) {
			break
		}
		if ctx.Err() != nil {
			if attempt == 1 {
				res.Error = "cancelled before it ran"
			}
			break
		}
		res.Attempts = attempt
		st.attempt(ctx, &res, step, attempt)
		if res.Status == api.StepSuccess || attempt > step.Retries {
			break
		}
	}
	return res
}

// attempt sends the step once and waits for its results. A cancelled
// session gives it cancelGrace more to finish.
func (st sessionStepper) attempt(ctx context.Context, res *api.StepResult, step plan.Step, attempt int) {
	s := st.s
	dev := st.m.reg.device(s.DeviceID)
	var offlineWait time.Duration
	if dev == nil {
		offlineWait = st.m.graceLeft(s.DeviceID)
	}
	actions, tools, err := resolveActions(dev, st.m.disp.inventory(s.DeviceID), s.DeviceID, step.Batch())
	if err != nil {
		res.Status, res.ResponseID, res.Results, res.Error = api.StepFailure, "", nil, err.Error()
		s.events.add(api.TaskEvent{Type: api.EventStepEnd, SessionID: s.ID, Steps: s.steps, Step: &res.Step, Attempt: attempt, Tool: res.Tool, Status: res.Status, Error: res.Error})
		return
	}
	cmd := st.m.disp.newCommand(commandSpec{
		deviceID: s.DeviceID, sessionID: s.ID, actor: s.Requester.String(),
		step: res.Step, attempt: attempt, actions: actions, tools: tools, timeout: step.TimeoutOrDefault(),
		offlineWait: offlineWait,
	})
	s.events.add(api.TaskEvent{Type: api.EventStepStart, SessionID: s.ID, Steps: s.steps, Step: &res.Step, Attempt: attempt, Tool: res.Tool, ResponseID: cmd.rec.ResponseID})
	gctx, cancel := withGrace(ctx, cancelGrace)
	resp, ended, err := st.m.disp.run(gctx, cmd, st.m.insertOnce(s))
	cancel()
	if err == nil {
		s.persisted = true
	}
	if ended && s.Kind == api.KindCommand {
		s.endedWithCommand = true
	}
	res.ResponseID, res.Results = resp.ResponseID, resp.Results
	res.Status, res.Error = api.StepSuccess, ""
	if err != nil {
		res.Status, res.Error = api.StepFailure, err.Error()
	} else if !resp.Succeeded() {
		res.Status, res.Error = api.StepFailure, resp.FirstError()
	}
	s.events.add(api.TaskEvent{Type: api.EventStepEnd, SessionID: s.ID, Steps: s.steps, Step: &res.Step, Attempt: attempt, Tool: res.Tool,
		ResponseID: res.ResponseID, Status: res.Status, Results: res.Results, Error: res.Error})
}

// withGrace returns a context that ends grace after ctx ends, with ctx's
// cause.
func withGrace(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		time.AfterFunc(grace, func() { cancel(context.Cause(ctx)) })
	})
	return gctx, func() { stop(); cancel(context.Canceled) }
}

// sleep waits d unless ctx ends first, and reports whether it waited.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// resolveActions turns a step's actions into wire commands, using the
// device's inventory (that of its last registration while it is offline,
// when dev is nil): "namespace.tool" must name a tool the device has in
// that namespace, and is sent with that tool's tool_type so the agent runs
// exactly it (the agent keys tools by tool_type::tool_name). It also
// returns what the audit log records about each tool.
func resolveActions(dev *client, tools []protocol.MCPToolInfo, deviceID string, batch []plan.Action) ([]protocol.Command, []store.ToolRef, error) {
	cmds := make([]protocol.Command, len(batch))
	refs := make([]store.ToolRef, len(batch))
	for i, a := range batch {
		ns, name := a.Ref()
		cmds[i] = protocol.Command{ToolName: name, ToolType: a.ToolType, Parameters: a.Parameters}
		t, found := findTool(tools, ns, name, a.ToolType)
		switch {
		case ns != "" && !found && dev == nil:
			return nil, nil, fmt.Errorf("device %q is offline, and its last registration listed no tool %q", deviceID, a.Label())
		case ns != "" && !found:
			return nil, nil, fmt.Errorf("device %q has no tool %q", deviceID, a.Label())
		case ns != "":
			cmds[i].ToolType = t.ToolType
		case a.ToolType == "" && dev != nil && dev.conn.Encoding() == protocol.JSON:
			// UFO's Command requires tool_type, which our agent finds
			// itself but a UFO device does not.
			if !found {
				return nil, nil, fmt.Errorf("device %q speaks UFO's JSON and does not list %q: give its tool_type (data_collection or action)", deviceID, a.Label())
			}
			cmds[i].ToolType = t.ToolType
		case a.ToolType == "" && dev == nil && found:
			// Which wire the device comes back on is not known yet: UFO's
			// requires the tool_type, and our agent takes it.
			cmds[i].ToolType = t.ToolType
		}
		if found {
			refs[i] = store.ToolRef{Namespace: t.Namespace, SHA256: toolSHA256(t)}
		}
		if name == protocol.InstallToolName {
			// The module that matters is the one being installed.
			refs[i].SHA256, _ = a.Parameters["sha256"].(string)
		}
	}
	return cmds, refs, nil
}

// findTool looks a tool up as the agent would: by tool_type::tool_name, or
// when no type is given, under each type in turn; a namespace, if given,
// must match too.
func findTool(tools []protocol.MCPToolInfo, ns, name string, tt protocol.ToolType) (protocol.MCPToolInfo, bool) {
	types := protocol.ToolTypes[:]
	if tt != "" {
		types = []protocol.ToolType{tt}
	}
	for _, want := range types {
		for _, t := range tools {
			if t.ToolName == name && t.ToolType == want && (ns == "" || t.Namespace == ns) {
				return t, true
			}
		}
	}
	return protocol.MCPToolInfo{}, false
}

// toolSHA256 is the module hash the agent reports in a tool's meta.
func toolSHA256(t protocol.MCPToolInfo) string {
	s, _ := t.Meta["sha256"].(string)
	return s
}
