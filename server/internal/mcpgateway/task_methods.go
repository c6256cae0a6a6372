package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/mark3labs/mcp-go/mcp"
)

// tasksExtension is the tasks extension of revision 2026-07-28, which a
// client declares in each request's capabilities and the server in its
// own.
const tasksExtension = "io.modelcontextprotocol/tasks"

// taskListPage is how many tasks a tasks/list page holds.
const taskListPage = 50

// rpcRequest is a JSON-RPC request, its params left to its method.
type rpcRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// taskParams are the params of a tools/call or tasks/* request that the
// task methods read.
type taskParams struct {
	Name   string          `json:"name"`
	Task   *mcp.TaskParams `json:"task"`
	TaskID string          `json:"taskId"`
	Cursor string          `json:"cursor"`
	Meta   *mcp.Meta       `json:"_meta"`
}

// modern reports whether the request speaks revision 2026-07-28 or later.
func (p taskParams) modern() bool { return mcp.IsModernProtocol(p.Meta.ProtocolVersion()) }

// declaresTasks reports whether a 2026-07-28 request declares the tasks
// extension among its client's capabilities.
func (p taskParams) declaresTasks() bool {
	caps := p.Meta.ClientCapabilities()
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[tasksExtension]
	return ok
}

// taskMethods serves, in front of next (mcp-go's endpoint), what mcp-go
// would keep in one process's memory for one session: a tools/call that
// runs as a task, and the tasks/* methods, which read and cancel our
// tasks (RATIONALE.md, "MCP tasks are our tasks"). Everything else goes
// to next, its body as it came.
func (v *view) taskMethods(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		var req rpcRequest
		var p taskParams
		if err != nil || json.Unmarshal(body, &req) != nil || len(req.ID) == 0 || json.Unmarshal(orEmpty(req.Params), &p) != nil {
			next.ServeHTTP(w, r)
			return
		}
		ctx := withBaseURL(r.Context(), r)
		var result any
		var rerr *rpcError
		switch {
		case req.Method == string(mcp.MethodToolsCall) && v.runsAsTask(p):
			result, rerr = v.callAsTask(ctx, body, p, r.Header.Get(mcp.HeaderSessionID))
		case req.Method == string(mcp.MethodToolsCall) && p.Task != nil && !p.modern():
			rerr = &rpcError{Code: mcp.METHOD_NOT_FOUND, Message: fmt.Sprintf("tool %q does not run as a task: only the calls of a device's tool do", p.Name)}
		case isTaskMethod(req.Method):
			result, rerr = v.taskMethod(ctx, req.Method, p)
		default:
			next.ServeHTTP(w, r)
			return
		}
		writeRPC(w, req.ID, result, rerr)
	})
}

// errReader reads as err, or as the end once err is nil.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

// orEmpty is raw, or an empty object if there is none.
func orEmpty(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`)
	}
	return raw
}

// isTaskMethod reports whether method is one of the tasks/* methods.
func isTaskMethod(method string) bool {
	switch mcp.MCPMethod(method) {
	case mcp.MethodTasksGet, mcp.MethodTasksResult, mcp.MethodTasksList, mcp.MethodTasksCancel, methodTasksUpdate:
		return true
	}
	return false
}

// methodTasksUpdate answers a task's input requests (2026-07-28); a task
// of ours never asks for any.
const methodTasksUpdate mcp.MCPMethod = "tasks/update"

// runsAsTask reports whether a tools/call with p runs as a task: a call
// of a device's tool whose client asked for a task (2025-11-25's task
// field), or whose client supports them (2026-07-28's extension, where
// the server decides: a device's tool always runs as one then).
func (v *view) runsAsTask(p taskParams) bool {
	asks := p.Task != nil
	if p.modern() {
		asks = p.declaresTasks()
	}
	return asks && v.taskCapable(p.Name)
}

// callAsTask starts the tools/call body, whose params are p, as a task,
// and answers its CreateTaskResult. A refusal is what a call would
// answer on 2026-07-28, where the server may answer a task-capable call
// with a plain result; on 2025-11-25, which wants a task, it is an
// invalid-params error naming what was wrong.
func (v *view) callAsTask(ctx context.Context, body []byte, p taskParams, session string) (any, *rpcError) {
	var req mcp.CallToolRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, &rpcError{Code: mcp.INVALID_PARAMS, Message: err.Error()}
	}
	tool, release, err := v.takeCall(p.Name)
	if err != nil {
		return v.taskRefused(p, err)
	}
	defer release()
	var notify *taskNotifier
	var asked *int64
	if !p.modern() {
		notify = &taskNotifier{v: v, session: session}
		if p.Meta != nil {
			notify.token = p.Meta.ProgressToken
		}
		asked = p.Task.TTL
	}
	t, err := v.startTask(ctx, req, asked, notify)
	var started *taskStarted
	if errors.As(err, &started) {
		v.countCall(tool, nil, err)
		return nil, &rpcError{Code: mcp.INTERNAL_ERROR, Message: err.Error()}
	}
	if err != nil {
		v.countCall(tool, nil, err)
		return v.taskRefused(p, err)
	}
	v.countCall(tool, &mcp.CallToolResult{}, nil)
	if p.modern() {
		return t.v2("task"), nil
	}
	immediate := fmt.Sprintf("Task %s started: %s. tasks/get follows it, tasks/result waits for its result.", t.id, t.message)
	return mcp.CreateTaskResult{Task: t.legacy(), Result: mcp.Result{Meta: mcp.WithModelImmediateResponse(immediate)}}, nil
}

// taskRefused answers a call refused as a task (see callAsTask).
func (v *view) taskRefused(p taskParams, err error) (any, *rpcError) {
	if p.modern() {
		res := mcp.NewToolResultError(err.Error())
		res.ResultType = mcp.ResultTypeComplete
		return res, nil
	}
	return nil, &rpcError{Code: mcp.INVALID_PARAMS, Message: err.Error()}
}

// taskMethod answers tasks/get, tasks/result, tasks/list, tasks/cancel
// and tasks/update, for the caller's own tasks in its scope: those of any
// session, through any node, since the store holds them. 2026-07-28 has
// no tasks/list or tasks/result, and serves a client that declares the
// extension only.
func (v *view) taskMethod(ctx context.Context, method string, p taskParams) (any, *rpcError) {
	m := mcp.MCPMethod(method)
	if p.modern() {
		switch {
		case m == mcp.MethodTasksList || m == mcp.MethodTasksResult:
			return nil, &rpcError{Code: mcp.METHOD_NOT_FOUND, Message: fmt.Sprintf("%s is not part of protocol version %s: tasks/get has the result", method, p.Meta.ProtocolVersion())}
		case !p.declaresTasks():
			return nil, &rpcError{Code: mcp.MISSING_REQUIRED_CLIENT_CAPABILITY, Message: "Missing required client capability: the extension " + tasksExtension}
		}
	} else if m == methodTasksUpdate {
		return nil, &rpcError{Code: mcp.METHOD_NOT_FOUND, Message: "tasks/update is not part of protocol version 2025-11-25"}
	}
	if m == mcp.MethodTasksList {
		return v.g.listTasks(ctx, p.Cursor)
	}
	t, err := v.g.readTask(ctx, p.TaskID)
	if err != nil {
		return nil, taskError(p.TaskID, err)
	}
	switch m {
	case mcp.MethodTasksResult:
		return v.g.taskResult(ctx, t)
	case mcp.MethodTasksCancel:
		return v.g.cancelTask(ctx, t, p.modern())
	case methodTasksUpdate:
		return mcp.Result{ResultType: mcp.ResultTypeComplete}, nil
	}
	if p.modern() {
		return t.v2(mcp.ResultTypeComplete), nil
	}
	return mcp.GetTaskResult{Task: t.legacy()}, nil
}

// taskError is err, reading task id, as a JSON-RPC error: one the caller
// may not read is not found.
func taskError(id string, err error) *rpcError {
	if errors.Is(err, errNoTask) {
		return &rpcError{Code: mcp.INVALID_PARAMS, Message: fmt.Sprintf("Failed to retrieve task %q: %v", id, err)}
	}
	return &rpcError{Code: mcp.INTERNAL_ERROR, Message: fmt.Sprintf("task %q: %v", id, err)}
}

// taskResult is tasks/result: what the call answered, once task t ended,
// wherever it runs; it waits for that.
func (g *Gateway) taskResult(ctx context.Context, t mcpTask) (any, *rpcError) {
	if !t.state.Ended() {
		if _, err := g.cfg.Tasks.Ended(ctx, t.id, nil); err != nil {
			return nil, taskError(t.id, err)
		}
		var err error
		if t, err = g.readTask(ctx, t.id); err != nil {
			return nil, taskError(t.id, err)
		}
	}
	if t.result == nil {
		return nil, &rpcError{Code: mcp.INTERNAL_ERROR, Message: fmt.Sprintf("task %q ended %s with no result: %s", t.id, t.state, t.message)}
	}
	res := *t.result
	res.Meta = mcp.WithRelatedTask(t.id)
	return res, nil
}

// cancelTask is tasks/cancel of t, which ends cancelled before the
// answer, with the tool call its device runs (as cancel_task does).
func (g *Gateway) cancelTask(ctx context.Context, t mcpTask, modern bool) (any, *rpcError) {
	if t.state.Ended() {
		return nil, &rpcError{Code: mcp.INVALID_PARAMS, Message: fmt.Sprintf("Cannot cancel task %q: already in terminal status %q", t.id, t.legacy().Status)}
	}
	who := identity.CallerIn(ctx)
	err := g.cfg.Tasks.CancelAnywhere(ctx, t.id, "tasks/cancel by "+who.Name)
	if err != nil && !errors.Is(err, tasks.ErrNotRunning) {
		return nil, taskError(t.id, err)
	}
	if t, err = g.readTask(ctx, t.id); err != nil {
		return nil, taskError(t.id, err)
	}
	if modern {
		return mcp.Result{ResultType: mcp.ResultTypeComplete}, nil
	}
	return mcp.CancelTaskResult{Task: t.legacy()}, nil
}

// listTasks is tasks/list: a page of the caller's tasks in its scope,
// newest first, from cursor ("" the first page).
func (g *Gateway) listTasks(ctx context.Context, cursor string) (any, *rpcError) {
	who := identity.CallerIn(ctx)
	after, err := store.ReadCursor(cursor)
	if err != nil {
		return nil, &rpcError{Code: mcp.INVALID_PARAMS, Message: fmt.Sprintf("cursor %q: %v (a page's nextCursor)", cursor, err)}
	}
	rows, err := g.cfg.Tasks.Tasks(ctx, store.SessionFilter{RequesterKind: api.RequesterMCP, Identity: who.Name, TopLevel: true,
		After: after, Limit: taskListPage + 1})
	if err != nil {
		return nil, &rpcError{Code: mcp.INTERNAL_ERROR, Message: err.Error()}
	}
	out := mcp.ListTasksResult{Tasks: []mcp.Task{}}
	for i, row := range rows {
		if i == taskListPage {
			out.NextCursor = mcp.Cursor(store.CursorAfter(rows[i-1]))
			break
		}
		t, err := g.readTask(ctx, row.ID)
		switch {
		case errors.Is(err, errNoTask): // outside the caller's scope now
		case err != nil:
			return nil, taskError(row.ID, err)
		default:
			out.Tasks = append(out.Tasks, t.legacy())
		}
	}
	return out, nil
}

// writeRPC answers JSON-RPC request id with result, or with rerr.
func writeRPC(w http.ResponseWriter, id json.RawMessage, result any, rerr *rpcError) {
	msg := map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id}
	if rerr != nil {
		msg["error"] = rerr
	} else {
		msg["result"] = result
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(msg)
}
