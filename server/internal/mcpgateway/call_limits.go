package mcpgateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/server/metrics"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// callLimits bound one identity's tool calls on the gateway: at most
// perMinute in any minute, and atOnce running at a time.
type callLimits struct {
	perMinute int
	atOnce    chan struct{}

	mu     sync.Mutex
	recent []time.Time // the calls' starts within the last minute
}

func newCallLimits(perMinute, atOnce int) *callLimits {
	return &callLimits{perMinute: perMinute, atOnce: make(chan struct{}, atOnce)}
}

// take admits one call, or says which limit refuses it; release, if the
// call was admitted, ends it.
func (l *callLimits) take(now time.Time) (release func(), limit string, err error) {
	l.mu.Lock()
	i := 0
	for i < len(l.recent) && now.Sub(l.recent[i]) >= time.Minute {
		i++
	}
	l.recent = l.recent[i:]
	if len(l.recent) >= l.perMinute {
		retry := time.Minute - now.Sub(l.recent[0])
		l.mu.Unlock()
		return nil, "per_minute", fmt.Errorf("over the limit of %d calls a minute for this identity: try again in %s", l.perMinute, retry.Round(time.Second))
	}
	select {
	case l.atOnce <- struct{}{}:
	default:
		l.mu.Unlock()
		return nil, "at_once", fmt.Errorf("over the limit of %d calls at once for this identity: wait for one to end", cap(l.atOnce))
	}
	l.recent = append(l.recent, now)
	l.mu.Unlock()
	return func() { <-l.atOnce }, "", nil
}

// counted is the middleware every tool call of v passes: the identity's
// limits, then the call, counted in the metrics by its outcome.
func (v *view) counted(next mcpserver.ToolHandlerFunc) mcpserver.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tool, release, err := v.takeCall(req.Params.Name)
		if err != nil {
			return refused(err)
		}
		defer release()
		res, err := next(ctx, req)
		v.countCall(tool, res, err)
		return res, err
	}
}

// takeCall admits a call of tool name within the identity's limits, or
// counts it refused and says why; release ends it. tool is the name the
// metrics know it by.
func (v *view) takeCall(name string) (tool string, release func(), err error) {
	tool = name
	v.mu.Lock()
	if _, ok := v.direct[name]; ok {
		tool = mcpDeviceTool
	}
	v.mu.Unlock()
	release, limit, err := v.limits.take(time.Now())
	if err != nil {
		v.g.cfg.Metrics.MCPLimited(limit)
		v.g.cfg.Metrics.MCPCall(tool, metrics.MCPFailed)
	}
	return tool, release, err
}

// countCall counts a call of tool, which answered res or err.
func (v *view) countCall(tool string, res *mcp.CallToolResult, err error) {
	outcome := metrics.MCPResult
	switch {
	case err != nil:
		outcome = metrics.MCPError
	case res != nil && res.IsError:
		outcome = metrics.MCPFailed
	}
	v.g.cfg.Metrics.MCPCall(tool, outcome)
}
