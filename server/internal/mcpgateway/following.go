package mcpgateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/internal/mcptool"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/mark3labs/mcp-go/mcp"
)

// following is a task an MCP request waits on: its events, which become
// progress notifications, and what to cancel if the client cancels.
type following struct {
	ctx      context.Context
	progress *mcptool.Progress
	events   chan api.TaskEvent
}

func newFollowing(ctx context.Context, req mcp.CallToolRequest) *following {
	return &following{ctx: ctx, progress: mcptool.NewProgress(ctx, req), events: make(chan api.TaskEvent, 64)}
}

// tee takes a task event; it never blocks the session that emits it.
func (f *following) tee(e api.TaskEvent) {
	select {
	case f.events <- e:
	default:
	}
}

// eventText is a task event as a progress message.
func eventText(e api.TaskEvent) string {
	where := e.DeviceID
	step := ""
	if e.Step != nil {
		step = fmt.Sprintf(" step %d/%d", *e.Step+1, e.Steps)
	}
	switch e.Type {
	case api.EventStepStart:
		return fmt.Sprintf("%s%s: %s sent", where, step, e.Tool)
	case api.EventStepEnd:
		return fmt.Sprintf("%s%s: %s %s %s", where, step, e.Tool, e.Status, e.Error)
	case api.EventPreparing:
		return fmt.Sprintf("%s%s: %s", where, step, api.PreparingText(e.Preparing))
	case api.EventDeviceStart, api.EventDeviceEnd, api.EventEnd:
		return fmt.Sprintf("%s %s %s %s", where, e.Type, e.State, e.Error)
	}
	return e.Type
}

// wait waits for done, sending progress from the task's events and every
// mcptool.ProgressEvery while it runs. If the client cancels (ctx ends), task id
// is cancelled, with the tool call its device runs, and wait still waits
// for done: the task's end is recorded either way; a task that has not
// started yet is cancelled as soon as it has. If the server ends the
// request (its identity revoked, or shutdown), wait returns at once: the
// request must end within a second, and a device that does not answer
// the cancellation holds the task for cancelGrace.
func (f *following) wait(g *Gateway, done <-chan struct{}, id string) (cancelled bool) {
	tick := time.NewTicker(mcptool.ProgressEvery)
	defer tick.Stop()
	started := time.Now()
	var why string // a cancellation not yet delivered
	for {
		if why != "" && !errors.Is(g.cfg.Tasks.Cancel(id, why), tasks.ErrNotRunning) {
			why = ""
		}
		select {
		case <-done:
			f.flush()
			return cancelled
		case e := <-f.events:
			f.progress.Send(eventText(e))
		case now := <-tick.C:
			f.progress.Running(now, started)
		case <-f.ctx.Done():
			reason, byServer := cancelReason(f.ctx)
			if byServer {
				go g.cfg.Tasks.Cancel(id, reason)
				return true
			}
			if !cancelled {
				cancelled, why = true, reason
			}
			f.ctx = context.WithoutCancel(f.ctx)
			f.progress.Detach()
		}
	}
}

// flush sends the progress of the events the task emitted before it
// ended that wait has not taken yet: select picks done as readily as them.
func (f *following) flush() {
	for {
		select {
		case e := <-f.events:
			f.progress.Send(eventText(e))
		default:
			return
		}
	}
}

// cancelReason says why an MCP request's context ended: the client
// cancelled or went away, or the server ended it (its identity revoked,
// or shutdown; see ServeHTTP).
func cancelReason(ctx context.Context) (why string, byServer bool) {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause.Error(), true
	}
	return "the MCP client cancelled the call", false
}

// runCommand runs the admitted command cmd, whose events f follows, with
// progress, and cancels it if the client does. It runs apart from the
// request's context: the command's end is recorded however the request
// ends.
func (g *Gateway) runCommand(ctx context.Context, f *following, cmd tasks.AdmittedCommand) (api.CommandResponse, error) {
	id := cmd.SessionID()
	var resp api.CommandResponse
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err = cmd.Run(context.WithoutCancel(ctx))
	}()
	cancelled := f.wait(g, done, id)
	select {
	case <-done:
	default:
		// The server ended the request (its identity revoked, or
		// shutdown) and wait returned at once: the task ends on its own,
		// recorded, and resp and err are not ours to read yet.
		why, _ := cancelReason(ctx)
		return api.CommandResponse{SessionID: id}, fmt.Errorf("%s; the task %s is cancelled", why, id)
	}
	if err == nil && cancelled {
		err = fmt.Errorf("cancelled by the client; the task %s ended %s", resp.SessionID, resp.Status)
	}
	return resp, err
}
