package mcptool

import (
	"context"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// ProgressEvery is how often a call that is still running tells its
// client so: a client whose timeout resets on progress keeps waiting for
// a long call.
const ProgressEvery = time.Second

// Progress sends the progress notifications of one tool call, if its
// client asked for them (a progress token in the call's _meta), on the
// call's own stream.
type Progress struct {
	ctx   context.Context
	token mcp.ProgressToken // nil: the client asked for no progress
	sent  float64
}

// NewProgress is the progress of call req, served on ctx.
func NewProgress(ctx context.Context, req mcp.CallToolRequest) *Progress {
	p := &Progress{ctx: ctx}
	if req.Params.Meta != nil {
		p.token = req.Params.Meta.ProgressToken
	}
	return p
}

// Send sends a progress notification saying msg, if the client asked
// for them.
func (p *Progress) Send(msg string) {
	if p.token == nil {
		return
	}
	srv := server.ServerFromContext(p.ctx)
	if srv == nil {
		return
	}
	p.sent++
	srv.SendNotificationToClient(p.ctx, string(mcp.MethodNotificationProgress),
		map[string]any{"progressToken": p.token, "progress": p.sent, "message": msg})
}

// Running sends "running, 3s" (how long since started) as progress.
func (p *Progress) Running(now, started time.Time) {
	p.Send(fmt.Sprintf("running, %s", now.Sub(started).Round(time.Second)))
}

// Detach makes p send on a context that is never cancelled, for a call
// whose client cancelled it but whose end is still to be told.
func (p *Progress) Detach() { p.ctx = context.WithoutCancel(p.ctx) }
