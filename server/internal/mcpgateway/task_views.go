package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/mark3labs/mcp-go/mcp"
)

// taskPollInterval is the polling interval a task suggests to its client.
const taskPollInterval = time.Second

// errNoTask: no task of the caller's by that id (none at all, another
// identity's, or outside its scope, which read alike).
var errNoTask = errors.New("task not found")

// mcpTask is one of our tasks as MCP reads it, in either revision: what
// the store holds of it, shown as inscope.Sight shows it to the caller.
type mcpTask struct {
	id      string
	state   api.TaskState
	message string // why it failed or was cancelled, or what it waits for
	created time.Time
	updated time.Time
	// ttl is a single command's timeout, the ttl it was asked with within
	// the operator's bound; zero for a plan (no ttl).
	ttl time.Duration
	// result is what the call answered, once it ended.
	result *mcp.CallToolResult
}

// readTask reads task id for the caller in ctx: one of its identity's
// MCP tasks, in its scope; errNoTask otherwise. A fleet's task on one of
// its devices is part of the fleet's, as tasks/list lists them.
func (g *Gateway) readTask(ctx context.Context, id string) (mcpTask, error) {
	who := identity.CallerIn(ctx)
	row, err := g.cfg.Tasks.Task(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return mcpTask{}, errNoTask
	case err != nil:
		return mcpTask{}, err
	case row.RequesterKind != api.RequesterMCP || row.Identity != who.Name || row.ParentID != "":
		return mcpTask{}, errNoTask
	}
	in, err := g.cfg.InScope.Row(ctx, who, row)
	switch {
	case err != nil:
		return mcpTask{}, err
	case !in:
		return mcpTask{}, errNoTask
	}
	sight, err := g.cfg.InScope.Sight(ctx, who, row)
	if err != nil {
		return mcpTask{}, err
	}
	t := sight.Task(inscope.TaskView(row))
	out := mcpTask{id: id, state: t.State, message: t.Error, created: row.CreatedAt, updated: lastUpdate(row)}
	if row.Kind != api.KindCommand {
		if t.State.Ended() {
			out.result, err = planResult(t)
		}
		return out, err
	}
	cmds, err := g.cfg.Tasks.Commands(ctx, id)
	if err != nil {
		return mcpTask{}, err
	}
	tool := ""
	if len(cmds) > 0 {
		out.ttl = cmds[0].Timeout
		if len(cmds[0].Actions) > 0 {
			tool = cmds[0].Actions[0].ToolName
		}
	}
	switch {
	case t.State.Ended():
		out.result = g.commandResult(ctx, fmt.Sprintf("%s on %s (task %s)", tool, row.DeviceID, id), t)
	case !g.cfg.InScope.Online(ctx, who, row.DeviceID):
		out.message = fmt.Sprintf("waiting for device %q to come online", row.DeviceID)
	default:
		out.message = fmt.Sprintf("running on device %q", row.DeviceID)
	}
	return out, nil
}

// lastUpdate is when row last changed state.
func lastUpdate(row store.Session) time.Time {
	for _, t := range []time.Time{row.FinishedAt, row.StartedAt} {
		if !t.IsZero() {
			return t
		}
	}
	return row.CreatedAt
}

// commandResult is what a single command's call answered, from its task
// t as the caller sees it: the call's result, as call_device_tool
// answers it.
func (g *Gateway) commandResult(ctx context.Context, what string, t api.Task) *mcp.CallToolResult {
	var resp api.CommandResponse
	if json.Unmarshal(t.Result, &resp) != nil || len(resp.Results) == 0 {
		return mcp.NewToolResultError(fmt.Sprintf("%s: %s %s", what, t.State, t.Error))
	}
	return g.result(ctx, what, resp.Results[0], t.SessionID)
}

// planResult is what dispatch_plan answers for its task t once it ended.
func planResult(t api.Task) (*mcp.CallToolResult, error) {
	res, err := jsonResult(t)
	if res != nil {
		res.IsError = t.State != api.StateCompleted
	}
	return res, err
}

// legacy is t as revision 2025-11-25 shows a task: a tool call that ended
// in an error result failed.
func (t mcpTask) legacy() mcp.Task {
	status := mcp.TaskStatusWorking
	switch t.state {
	case api.StateCompleted:
		status = mcp.TaskStatusCompleted
	case api.StateFailed:
		status = mcp.TaskStatusFailed
	case api.StateCancelled:
		status = mcp.TaskStatusCancelled
	}
	poll := taskPollInterval.Milliseconds()
	return mcp.Task{TaskId: t.id, Status: status, StatusMessage: t.message, CreatedAt: isoTime(t.created),
		LastUpdatedAt: isoTime(t.updated), TTL: t.ttlMs(), PollInterval: &poll}
}

// ttlMs is t's ttl in milliseconds, nil for none.
func (t mcpTask) ttlMs() *int64 {
	if t.ttl <= 0 {
		return nil
	}
	ms := t.ttl.Milliseconds()
	return &ms
}

// taskV2 is a task as revision 2026-07-28's tasks extension shows it (its
// DetailedTask, or with resultType "task" its CreateTaskResult).
type taskV2 struct {
	ResultType     string              `json:"resultType"`
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	LastUpdatedAt  string              `json:"lastUpdatedAt"`
	TTLMs          *int64              `json:"ttlMs"`
	PollIntervalMs int64               `json:"pollIntervalMs"`
	Result         *mcp.CallToolResult `json:"result,omitempty"`
	Error          *rpcError           `json:"error,omitempty"`
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// v2 is t as the tasks extension shows it, resultType set to rt. There a
// tool call that ended in an error result is completed, with that
// result: failed is for JSON-RPC errors, which a task of ours never ends
// in once it has a result.
func (t mcpTask) v2(rt mcp.ResultType) taskV2 {
	out := taskV2{ResultType: string(rt), TaskID: t.id, Status: string(mcp.TaskStatusWorking), StatusMessage: t.message,
		CreatedAt: isoTime(t.created), LastUpdatedAt: isoTime(t.updated), TTLMs: t.ttlMs(), PollIntervalMs: taskPollInterval.Milliseconds()}
	switch {
	case t.state == api.StateCancelled:
		out.Status = string(mcp.TaskStatusCancelled)
	case t.state.Ended() && t.result != nil:
		out.Status, out.Result = string(mcp.TaskStatusCompleted), t.result
		out.Result.ResultType = mcp.ResultTypeComplete
	case t.state.Ended():
		out.Status, out.Error = string(mcp.TaskStatusFailed), &rpcError{Code: mcp.INTERNAL_ERROR, Message: t.message}
	}
	return out
}

// isoTime is t as MCP's timestamps are written: ISO 8601, UTC.
func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
