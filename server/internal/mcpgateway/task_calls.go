package mcpgateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// defaultTaskTTL is a task's ttl when its client asks for none, within
// the operator's bound.
const defaultTaskTTL = time.Hour

// taskCapable reports whether tool name, one v's identity may call,
// may run as a task: the calls of a device's tool (call_device_tool and
// DEVICE__TOOL), which may wait for their device.
func (v *view) taskCapable(name string) bool {
	if name == mcpCallDeviceTool {
		return identity.Allow(v.who, identity.MCPKey(name)) == nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.direct[name]
	return ok
}

// withTaskSupport marks the tools that may run as tasks, in tools/list:
// execution.taskSupport "optional". v.mu is held.
func (v *view) withTaskSupport(t mcp.Tool) mcp.Tool {
	if t.Name == mcpCallDeviceTool || v.direct[t.Name].device != "" {
		t.Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportOptional}
	}
	return t
}

// taskTTL is the ttl a task gets when asked for asked (nil: none asked),
// held within the operator's bound and by the call's own timeout, if it
// gave one: the ttl is the command's timeout, so that a task that waits
// for its device ends within its ttl.
func (g *Gateway) taskTTL(asked *int64, timeout string) (time.Duration, error) {
	ttl := min(defaultTaskTTL, g.cfg.Options.TaskMaxTTL)
	if asked != nil && *asked > 0 {
		ttl = time.Duration(min(*asked, g.cfg.Options.TaskMaxTTL.Milliseconds())) * time.Millisecond
	}
	if timeout != "" {
		d, err := api.ParseTimeout(timeout)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf(`argument "timeout": %q is not a positive duration`, timeout)
		}
		ttl = min(ttl, d)
	}
	return max(ttl, time.Second), nil
}

// startTask starts req, a call of a device's tool, as a task whose ttl
// its client asked for: a single command that waits for its device
// within the ttl, run apart from the request, which no session's end
// cancels. It returns once the task is recorded, so that any node can
// read it: the task as it is then. notify, if not nil, hears the task's
// progress and status (the session that asked, on 2025-11-25).
func (v *view) startTask(ctx context.Context, req mcp.CallToolRequest, asked *int64, notify *taskNotifier) (mcpTask, error) {
	c, err := v.callOf(req)
	if err != nil {
		return mcpTask{}, err
	}
	ttl, err := v.g.taskTTL(asked, c.timeout)
	if err != nil {
		return mcpTask{}, err
	}
	events := make(chan api.TaskEvent, 64)
	var tee func(api.TaskEvent) // events only a notifier reads
	if notify != nil {
		tee = func(e api.TaskEvent) {
			select {
			case events <- e:
			default:
			}
		}
	}
	cmd, err := v.admitCall(ctx, c, ttl.String(), true, tee)
	if err != nil {
		return mcpTask{}, err
	}
	id := cmd.SessionID()
	done := make(chan struct{})
	var runErr error // set once done is closed
	go func() {
		defer close(done)
		_, runErr = cmd.Run(context.WithoutCancel(ctx))
	}()
	go notify.follow(context.WithoutCancel(ctx), v.g, id, events, done)
	return v.g.recorded(ctx, id, done, func() error { return runErr })
}

// recorded waits until task id, started, is on record, and reads it: a
// single command's task is recorded with its command, just before it is
// sent. done is closed if the task ended first; runErr then says why if
// it never started.
func (g *Gateway) recorded(ctx context.Context, id string, done <-chan struct{}, runErr func() error) (mcpTask, error) {
	wait := time.Millisecond
	for {
		t, err := g.readTask(ctx, id)
		if !errors.Is(err, errNoTask) {
			return t, startedError(id, err)
		}
		select {
		case <-done:
			if err := runErr(); err != nil {
				return mcpTask{}, err // it never started
			}
			t, err := g.readTask(ctx, id)
			return t, startedError(id, err)
		case <-time.After(wait):
			wait = min(2*wait, 50*time.Millisecond)
		case <-ctx.Done():
			return mcpTask{}, startedError(id, context.Cause(ctx))
		}
	}
}

// taskStarted is an error about a task that started: the call must not
// be answered as refused, which a client would call again.
type taskStarted struct {
	id  string
	err error
}

func (e *taskStarted) Error() string {
	return fmt.Sprintf("task %s started, but could not be read: %v; tasks/get %s follows it", e.id, e.err, e.id)
}

func (e *taskStarted) Unwrap() error { return e.err }

// startedError is err about task id, which started; nil stays nil.
func startedError(id string, err error) error {
	if err == nil {
		return nil
	}
	return &taskStarted{id, err}
}

// taskNotifier sends a task's progress and status changes to the session
// that asked for it (revision 2025-11-25): progress with the progress
// token of its request, and naming the task, as the spec asks; then
// notifications/tasks/status once it ends. A session that has gone hears
// nothing; the task goes on.
type taskNotifier struct {
	v       *view
	session string
	token   mcp.ProgressToken // nil: the client asked for no progress
}

// follow sends the task's progress from its events until it ends, then
// its status.
func (n *taskNotifier) follow(ctx context.Context, g *Gateway, id string, events <-chan api.TaskEvent, done <-chan struct{}) {
	if n == nil {
		return
	}
	sent := 0.0
	for {
		select {
		case e := <-events:
			n.progress(id, e, &sent)
		case <-done:
			n.flush(id, events, &sent)
			t, err := g.readTask(ctx, id)
			switch {
			case errors.Is(err, errNoTask): // it never started
			case err != nil:
				g.log.Warn("task status not sent", "task", id, "err", err)
			default:
				n.sendStatus(t)
			}
			return
		}
	}
}

// flush sends the progress of the events the task emitted before it
// ended that follow has not taken yet: select picks done as readily.
func (n *taskNotifier) flush(id string, events <-chan api.TaskEvent, sent *float64) {
	for {
		select {
		case e := <-events:
			n.progress(id, e, sent)
		default:
			return
		}
	}
}

// progress sends e, the sent-th event of task id, as progress, if the
// client asked for it.
func (n *taskNotifier) progress(id string, e api.TaskEvent, sent *float64) {
	if n.token == nil {
		return
	}
	*sent++
	n.send(string(mcp.MethodNotificationProgress), id, map[string]any{"progressToken": n.token, "progress": *sent, "message": eventText(e)})
}

// sendStatus sends notifications/tasks/status with t.
func (n *taskNotifier) sendStatus(t mcpTask) {
	l := t.legacy()
	params := map[string]any{"taskId": l.TaskId, "status": l.Status, "createdAt": l.CreatedAt, "lastUpdatedAt": l.LastUpdatedAt,
		"ttl": l.TTL, "pollInterval": l.PollInterval}
	if l.StatusMessage != "" {
		params["statusMessage"] = l.StatusMessage
	}
	n.send(mcp.MethodNotificationTasksStatus, "", params)
}

// send sends method with params to the session, naming task id in _meta
// if it is not empty.
func (n *taskNotifier) send(method, id string, params map[string]any) {
	s := n.v.client(n.session)
	if s == nil {
		return
	}
	note := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: method, Params: mcp.NotificationParams{AdditionalFields: params}}}
	if id != "" {
		note.Params.Meta = map[string]any{mcp.RelatedTaskMetaKey: mcp.RelatedTaskMeta(id)}
	}
	select {
	case s.NotificationChannel() <- note:
	default: // a client that does not read its stream misses it
	}
}

// client is session id of v, if it is registered: notifications for it
// go on its stream.
func (v *view) client(id string) mcpserver.ClientSession {
	if id == "" {
		return nil
	}
	s, _ := v.clients.Load(id)
	c, _ := s.(mcpserver.ClientSession)
	return c
}
