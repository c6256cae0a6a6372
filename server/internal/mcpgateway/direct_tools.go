package mcpgateway

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/internal/mcptool"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/mark3labs/mcp-go/mcp"
)

// directTarget is the device tool a DEVICE__TOOL tool calls.
type directTarget struct {
	device string
	info   protocol.MCPToolInfo
	tool   mcp.Tool
	// offlineSince is when the device was last heard from, if it is
	// offline (its tools are listed within Options.OfflineToolsGrace).
	offlineSince time.Time
}

// directTools are the tools of the devices in c's scope, each as a tool
// of its own with the device tool's input schema, when c may call tools
// and its scope covers at most DirectTools enrolled devices; the names
// are mcptool.Names of DEVICE__TOOL (README, "The MCP gateway"). A device
// offline for less than OfflineToolsGrace keeps its tools, as its last
// registration had them, described as offline since it was last heard
// from: a model that learned one hears that its device is offline, not
// that there is no such tool. The device's meta tools are left out:
// list_device_tools and the API are for those. expires is when the
// first offline device's tools are due to go, zero if none are listed.
func (g *Gateway) directTools(ctx context.Context, c *identity.Caller) (out []directTarget, expires time.Time, err error) {
	if g.cfg.Options.DirectTools < 0 || identity.Allow(c, identity.MCPKey(mcpDeviceTool)) != nil {
		return nil, time.Time{}, nil
	}
	// One past the threshold tells a scope over it.
	inScope, err := g.cfg.Store.Devices().Matching(ctx, c.Scope.Devices, g.cfg.Options.DirectTools+1)
	if err != nil {
		return nil, time.Time{}, err
	}
	if len(inScope) > g.cfg.Options.DirectTools {
		return nil, time.Time{}, nil
	}
	var named []mcptool.Named
	for _, id := range inScope {
		d, err := g.cfg.Store.Devices().Get(ctx, id)
		if err != nil {
			return nil, time.Time{}, err
		}
		view := g.cfg.InScope.DeviceView(d, c.Scope)
		var since time.Time
		if !view.Online {
			if view.LastSeen == nil || !g.listedOffline(*view.LastSeen) {
				continue
			}
			since = *view.LastSeen
			if gone := since.Add(g.cfg.Options.OfflineToolsGrace); expires.IsZero() || gone.Before(expires) {
				expires = gone
			}
		}
		if view.Info == nil {
			continue
		}
		for _, t := range view.Info.Tools {
			if isMetaTool(t) {
				continue
			}
			out = append(out, directTarget{device: id, info: t, offlineSince: since})
			named = append(named, mcptool.Named{Base: id + "__" + t.ToolName,
				Key: id + "\x00" + t.Namespace + "\x00" + string(t.ToolType) + "\x00" + t.ToolName})
		}
	}
	for i, name := range mcptool.Names(named) {
		out[i].tool = directTool(name, out[i])
	}
	return out, expires, nil
}

// listedOffline reports whether the tools of a device last heard from
// at seen are still listed.
func (g *Gateway) listedOffline(seen time.Time) bool {
	grace := g.cfg.Options.OfflineToolsGrace
	return grace > 0 && time.Since(seen) < grace
}

// directTool describes d under name: the device's tool, said to be on
// its device, and offline since when if it is.
func directTool(name string, d directTarget) mcp.Tool {
	t := mcptool.Tool(name, d.info)
	t.Description = "On device " + d.device + ": " + d.info.Description
	if !d.offlineSince.IsZero() {
		t.Description = fmt.Sprintf("On device %s, which is OFFLINE since %s: a call fails at once while it is; "+
			"call_device_tool with wait_for_device waits for it. %s", d.device, d.offlineSince.UTC().Format(time.RFC3339), d.info.Description)
	}
	t.Title += " on " + d.device
	t.Annotations.Title = t.Title
	return t
}

// isMetaTool reports whether t is one of a device's meta tools
// (list_tools, install_tool), which a model has no use for directly.
func isMetaTool(t protocol.MCPToolInfo) bool {
	return t.Namespace == "computer" || t.ToolName == protocol.InstallToolName
}

// offlineExpiry refreshes the views when the first offline device's
// tools are due to go from them: nothing else happens then.
type offlineExpiry struct {
	mu    sync.Mutex
	timer *time.Timer
	at    time.Time
}

// after makes refresh run at t, unless it runs sooner already; zero t asks
// nothing.
func (e *offlineExpiry) after(t time.Time, refresh func()) {
	if t.IsZero() {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.timer != nil && !e.at.After(t) && e.at.After(time.Now()) {
		return
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	e.at = t
	e.timer = time.AfterFunc(time.Until(t), refresh)
}

// stop stops the timer, as the gateway closes.
func (e *offlineExpiry) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.timer != nil {
		e.timer.Stop()
	}
}
