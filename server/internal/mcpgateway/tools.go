package mcpgateway

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/internal/mcptool"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/internal/tasks/planread"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// The gateway's tools, each with its key in the access policy ("MCP
// call_device_tool"): a caller sees, and may call, those its role allows.
const (
	mcpListDevices     = "list_devices"
	mcpListDeviceTools = "list_device_tools"
	mcpCallDeviceTool  = "call_device_tool"
	mcpDispatchPlan    = "dispatch_plan"
	mcpGetTask         = "get_task"
	mcpCancelTask      = "cancel_task"
	// mcpDeviceTool is the policy's key for the DEVICE__TOOL tools.
	mcpDeviceTool = "device_tool"
)

// defaultMCPTimeout is a call's timeout when the client gives none.
const defaultMCPTimeout = 60 * time.Second

// fixedTools are the gateway's own tools that v's identity may call.
func (v *view) fixedTools() []mcpserver.ServerTool {
	all := []mcpserver.ServerTool{
		{Tool: mcp.NewTool(mcpListDevices,
			mcp.WithDescription("Lists the devices you may use: id, whether online, labels, platform and how many tools."),
			hints("List devices", true, false, true, false), outputSchema(devicesSchema)), Handler: v.listDevices},
		{Tool: mcp.NewTool(mcpListDeviceTools,
			mcp.WithDescription("Lists a device's tools: name, tool_type, namespace, description and input schema."),
			mcp.WithString("device", mcp.Required(), mcp.Description("the device id")),
			hints("List a device's tools", true, false, true, false), outputSchema(deviceToolsSchema)), Handler: v.listDeviceTools},
		{Tool: mcp.NewTool(mcpCallDeviceTool,
			mcp.WithDescription("Calls one tool on one device, in its sandbox, and returns the AIP Result: status, result or error, and usage (fuel, wall time). Sends progress while it runs."),
			mcp.WithString("device", mcp.Required(), mcp.Description("the device id")),
			mcp.WithString("tool", mcp.Required(), mcp.Description("the tool's name, as list_device_tools gives it")),
			mcp.WithString("tool_type", mcp.Enum("data_collection", "action"), mcp.Description("the tool's type, when the device has the name under both")),
			mcp.WithObject("arguments", mcp.Description("the tool's parameters, as its input schema says")),
			mcp.WithString("timeout", mcp.Description("how long the call may take, e.g. 30s (default 60s, at most 24h), waiting for the device included")),
			mcp.WithBoolean("wait_for_device", mcp.Description("if the device is offline, wait, within the timeout, for it to link again, rather than fail at once (default false)")),
			hints("Call a device's tool", false, true, false, true), mcp.WithRawOutputSchema(mcptool.ResultSchema(nil))), Handler: v.callDeviceTool},
		{Tool: mcp.NewTool(mcpDispatchPlan,
			mcp.WithDescription("Runs a plan (steps of tool calls) on one device, or on every device with the given labels, as a task; waits for it to end, with progress, unless wait is false. A plan: {\"steps\": [{\"tool\": \"hash_file\", \"parameters\": {...}}]}."),
			mcp.WithString("device", mcp.Description("the device id; or give labels")),
			mcp.WithObject("labels", mcp.Description("run on every device with these labels, e.g. {\"site\": \"lobby\"}")),
			mcp.WithAny("plan", mcp.Required(), mcp.Description("the plan: an object, or its YAML or JSON as a string")),
			mcp.WithBoolean("wait", mcp.Description("wait for the task to end (default true)")),
			hints("Run a plan", false, true, false, true), outputSchema(planSchema)), Handler: v.dispatchPlan},
		{Tool: mcp.NewTool(mcpGetTask,
			mcp.WithDescription("Reads a task: its state, steps and results."),
			mcp.WithString("id", mcp.Required(), mcp.Description("the task id (session_id)")),
			hints("Read a task", true, false, true, false), outputSchema(taskSchema)), Handler: v.getTask},
		{Tool: mcp.NewTool(mcpCancelTask,
			mcp.WithDescription("Cancels a running task, and the tool call it is running on its device."),
			mcp.WithString("id", mcp.Required(), mcp.Description("the task id (session_id)")),
			hints("Cancel a task", false, true, true, false), outputSchema(taskSchema)), Handler: v.cancelTask},
	}
	var out []mcpserver.ServerTool
	for _, t := range all {
		if identity.Allow(v.who, identity.MCPKey(t.Tool.Name)) == nil {
			out = append(out, t)
		}
	}
	return out
}

// deviceSummary is a device as list_devices shows it.
type deviceSummary struct {
	ID       string            `json:"id"`
	Online   bool              `json:"online"`
	Labels   map[string]string `json:"labels,omitempty"`
	Platform string            `json:"platform,omitempty"`
	Arch     string            `json:"arch,omitempty"`
	Tools    int               `json:"tools"`
}

func (v *view) listDevices(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	who := identity.CallerIn(ctx)
	devs, err := v.g.cfg.Store.Devices().All(ctx)
	if err != nil {
		return nil, err
	}
	out := []deviceSummary{}
	for _, d := range devs {
		if !who.Scope.Device(d.Labels) {
			continue
		}
		view := v.g.cfg.InScope.DeviceView(d, who.Scope)
		sum := deviceSummary{ID: d.ID, Online: view.Online, Labels: d.Labels}
		if view.Info != nil {
			sum.Platform, sum.Arch, sum.Tools = view.Info.Platform, view.Info.Arch, len(view.Info.Tools)
		}
		out = append(out, sum)
	}
	return jsonResult(map[string]any{"devices": out})
}

// toolSummary is a tool as list_device_tools shows it.
type toolSummary struct {
	Name        string         `json:"name"`
	ToolType    string         `json:"tool_type"`
	Namespace   string         `json:"namespace,omitempty"`
	Description string         `json:"description,omitempty"`
	InputSchema map[string]any `json:"input_schema,omitempty"`
}

func (v *view) listDeviceTools(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id := req.GetString("device", "")
	if err := v.deviceInScope(ctx, id); err != nil {
		return refused(err)
	}
	d, err := v.g.cfg.Store.Devices().Get(ctx, id) // its last registration's tools
	if err != nil {
		return refused(err)
	}
	out := []toolSummary{}
	if view := v.g.cfg.InScope.DeviceView(d, identity.CallerIn(ctx).Scope); view.Info != nil {
		for _, t := range view.Info.Tools {
			out = append(out, toolSummary{Name: t.ToolName, ToolType: string(t.ToolType), Namespace: t.Namespace,
				Description: t.Description, InputSchema: t.InputSchema})
		}
	}
	return jsonResult(map[string]any{"device": id, "tools": out})
}

// deviceInScope says why the caller may not use device id, if it may
// not: one outside its scope is not enrolled, as the API answers. It reads
// the device cache, as every command does.
func (v *view) deviceInScope(ctx context.Context, id string) error {
	if id == "" {
		return errors.New(`argument "device": missing`)
	}
	d, err := v.g.cfg.Devices.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && !identity.CallerIn(ctx).Scope.Device(d.Labels) {
		return errors.New(inscope.DeviceNotEnrolled(id))
	}
	return err
}

// deviceCall is a call of one device's tool, as a tool call asks it:
// its device, its action, its timeout as given (empty: the default), and
// whether it waits for its device if that is offline.
type deviceCall struct {
	device  string
	action  protocol.Command
	timeout string
	wait    bool
}

// callOf reads the device call req asks for: call_device_tool's
// arguments, or a DEVICE__TOOL's, which are the tool's parameters.
func (v *view) callOf(req mcp.CallToolRequest) (deviceCall, error) {
	if req.Params.Name != mcpCallDeviceTool {
		v.mu.Lock()
		d, ok := v.direct[req.Params.Name]
		v.mu.Unlock()
		if !ok {
			return deviceCall{}, fmt.Errorf("no tool %q: the device or its tool is gone; list the tools again", req.Params.Name)
		}
		return deviceCall{device: d.device, action: protocol.Command{ToolName: d.info.ToolName, ToolType: d.info.ToolType, Parameters: req.GetArguments()}}, nil
	}
	args := req.GetArguments()
	params, ok := args["arguments"].(map[string]any)
	if !ok && args["arguments"] != nil {
		return deviceCall{}, fmt.Errorf(`argument "arguments": want an object, got %T`, args["arguments"])
	}
	action := protocol.Command{ToolName: req.GetString("tool", ""), ToolType: protocol.ToolType(req.GetString("tool_type", "")), Parameters: params}
	wait, ok := args["wait_for_device"].(bool)
	if !ok && args["wait_for_device"] != nil {
		return deviceCall{}, fmt.Errorf(`argument "wait_for_device": want a boolean, got %T`, args["wait_for_device"])
	}
	return deviceCall{device: req.GetString("device", ""), action: action, timeout: req.GetString("timeout", ""), wait: wait}, nil
}

// callDeviceTool is call_device_tool, and each DEVICE__TOOL tool.
func (v *view) callDeviceTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	c, err := v.callOf(req)
	if err != nil {
		return refused(err)
	}
	return v.runTool(ctx, req, c)
}

// admitCall checks c for the caller in ctx and admits it as a single
// command (the front door's AdmitCommand), with timeout, waiting for its
// device if wait, its events given to tee. Nothing is recorded or sent.
func (v *view) admitCall(ctx context.Context, c deviceCall, timeout string, wait bool, tee func(api.TaskEvent)) (tasks.AdmittedCommand, error) {
	if err := v.deviceInScope(ctx, c.device); err != nil {
		return tasks.AdmittedCommand{}, err
	}
	cmd, err := v.g.cfg.Tasks.AdmitCommand(tasks.CommandTask{
		Asker: tasks.Asker{Who: identity.CallerIn(ctx), Kind: api.RequesterMCP}, Device: c.device, Actions: []protocol.Command{c.action},
		Timeout: timeout, TimeoutArg: `argument "timeout"`, WaitForDevice: wait, Tee: tee,
	})
	var bad *tasks.InvalidActions
	if errors.As(err, &bad) {
		err = fmt.Errorf("argument %w", bad.Err)
	}
	return cmd, err
}

// runTool runs c as a single command, as POST
// /api/devices/{id}/commands does: admitted, recorded, audited under the
// caller, with progress while it runs and cancelled with the request.
func (v *view) runTool(ctx context.Context, req mcp.CallToolRequest, c deviceCall) (*mcp.CallToolResult, error) {
	f := newFollowing(ctx, req)
	cmd, err := v.admitCall(ctx, c, cmp.Or(c.timeout, defaultMCPTimeout.String()), c.wait, f.tee)
	if err != nil {
		return refused(err)
	}
	resp, err := v.g.runCommand(ctx, f, cmd)
	if err != nil {
		return refused(err)
	}
	what := fmt.Sprintf("%s on %s (task %s)", c.action.ToolName, c.device, resp.SessionID)
	res := resp.Results[0]
	return v.g.result(ctx, what, res, resp.SessionID), nil
}

// result is res as the answer to a call, cut to MaxResultBytes with a
// link to the task.
func (g *Gateway) result(ctx context.Context, what string, res protocol.Result, sessionID string) *mcp.CallToolResult {
	return mcptool.Result(what, res, mcptool.Cut{MaxBytes: g.cfg.Options.MaxResultBytes, WholeAt: taskURL(ctx, sessionID)})
}

func (v *view) dispatchPlan(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args := req.GetArguments()
	raw, err := json.Marshal(args["plan"])
	if err != nil || args["plan"] == nil {
		return refused(errors.New(`argument "plan": missing`))
	}
	p, err := planread.Field(raw, v.g.cfg.MaxPlanBytes)
	if err != nil {
		return refused(err)
	}
	who := identity.CallerIn(ctx)
	f := newFollowing(ctx, req)
	as := tasks.Asker{Who: who, Kind: api.RequesterMCP}
	device := req.GetString("device", "")
	labels, _ := args["labels"].(map[string]any)
	var sess *tasks.Session
	switch {
	case device != "" && labels != nil:
		return refused(errors.New(`give "device" or "labels", not both`))
	case device != "":
		if !v.g.cfg.InScope.Online(ctx, who, device) {
			return refused(fmt.Errorf("device %q is not online", device))
		}
		sess, err = v.g.cfg.Tasks.StartPlan(ctx, tasks.PlanTask{Asker: as, Device: device, Plan: p, Tee: f.tee})
	case labels != nil:
		sess, err = v.g.startFleet(ctx, tasks.FleetTask{Asker: as, Plan: p, Tee: f.tee}, labels)
	default:
		return refused(errors.New(`argument "device" or "labels": missing`))
	}
	if err != nil {
		return refused(err)
	}
	if wait, ok := args["wait"].(bool); ok && !wait {
		return jsonResult(map[string]any{"session_id": sess.ID, "task_name": sess.TaskName, "url": taskURL(ctx, sess.ID)})
	}
	f.wait(v.g, sess.Done(), sess.ID)
	task, err := v.g.taskInScope(context.WithoutCancel(ctx), sess.ID)
	if err != nil {
		return refused(err)
	}
	res, err := jsonResult(task)
	if res != nil {
		res.IsError = task.State != api.StateCompleted
	}
	return res, err
}

// startFleet starts t on the devices in its asker's scope that have
// labels, admitted on each.
func (g *Gateway) startFleet(ctx context.Context, t tasks.FleetTask, labels map[string]any) (*tasks.Session, error) {
	if len(labels) == 0 {
		return nil, errors.New(`argument "labels": at least one label is required`)
	}
	want := map[string]string{}
	for k, v := range labels {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf(`argument "labels": %q: want a string, got %T`, k, v)
		}
		want[k] = s
	}
	selector, devices, err := g.cfg.Tasks.FleetTargets(ctx, t.Who, want)
	if err != nil {
		return nil, err
	}
	t.Labels, t.Selector, t.Devices, t.Concurrency = want, selector, devices, api.DefaultFleetConcurrency
	return g.cfg.Tasks.StartFleet(ctx, t)
}

func (v *view) getTask(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	task, err := v.g.taskInScope(ctx, req.GetString("id", ""))
	if err != nil {
		return refused(err)
	}
	return jsonResult(task)
}

func (v *view) cancelTask(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id := req.GetString("id", "")
	if _, err := v.g.taskInScope(ctx, id); err != nil {
		return refused(err)
	}
	if err := v.g.cfg.Tasks.CancelAnywhere(ctx, id, "cancel_task by "+identity.CallerIn(ctx).Name); err != nil {
		return refused(err)
	}
	task, err := v.g.taskInScope(ctx, id)
	if err != nil {
		return refused(err)
	}
	return jsonResult(task)
}

// taskInScope reads task id, if the caller may see it: one read of the
// task's row, which holds what its scope is decided on (its device, or a
// fleet's selector), as it holds the task; shown as inscope.Sight shows
// it to the caller.
func (g *Gateway) taskInScope(ctx context.Context, id string) (api.Task, error) {
	if id == "" {
		return api.Task{}, errors.New(`argument "id": missing`)
	}
	row, err := g.cfg.Tasks.Task(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return api.Task{}, errors.New(inscope.NoTask(id))
	case err != nil:
		return api.Task{}, err
	}
	in, err := g.cfg.InScope.Row(ctx, identity.CallerIn(ctx), row)
	switch {
	case err != nil:
		return api.Task{}, err
	case !in:
		return api.Task{}, errors.New(inscope.NoTask(id))
	}
	sight, err := g.cfg.InScope.Sight(ctx, identity.CallerIn(ctx), row)
	if err != nil {
		return api.Task{}, err
	}
	return sight.Task(inscope.TaskView(row)), nil
}

// jsonResult is v as a tool's result: structuredContent, and its JSON as
// text.
func jsonResult(v any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{StructuredContent: v, Content: []mcp.Content{mcp.NewTextContent(string(b))}}, nil
}

// refused is an isError result that says what was wrong with the call,
// for the model to read and put right.
func refused(err error) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultError(err.Error()), nil
}
