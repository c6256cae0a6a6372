package mcpgateway

import (
	"context"

	"github.com/edgeaip/edgeaip/internal/mcptool"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/inscope"
	"github.com/mark3labs/mcp-go/mcp"
)

// directTarget is the device tool a DEVICE__TOOL tool calls.
type directTarget struct {
	device string
	info   protocol.MCPToolInfo
	tool   mcp.Tool
}

// directTools are the tools of the online devices in c's scope, each as a
// tool of its own with the device tool's input schema, when c may call
// tools and its scope covers at most DirectTools enrolled devices; the
// names are mcptool.Names of DEVICE__TOOL (README, "The MCP gateway").
// The device's meta tools are left out: list_device_tools and the API
// are for those.
func (g *Gateway) directTools(ctx context.Context, c *identity.Caller) ([]directTarget, error) {
	if g.cfg.Options.DirectTools < 0 || identity.Allow(c, identity.MCPKey(mcpDeviceTool)) != nil {
		return nil, nil
	}
	// One past the threshold tells a scope over it.
	inScope, err := g.cfg.Store.Devices().Matching(ctx, c.Scope.Devices, g.cfg.Options.DirectTools+1)
	if err != nil {
		return nil, err
	}
	if len(inScope) > g.cfg.Options.DirectTools {
		return nil, nil
	}
	var out []directTarget
	var named []mcptool.Named
	for _, id := range inScope {
		cl := g.cfg.Registry.Device(id)
		if cl == nil {
			continue
		}
		info := inscope.Info(cl.Info.Load(), c.Scope)
		if info == nil {
			continue
		}
		for _, t := range info.Tools {
			if isMetaTool(t) {
				continue
			}
			out = append(out, directTarget{device: id, info: t})
			named = append(named, mcptool.Named{Base: id + "__" + t.ToolName,
				Key: id + "\x00" + t.Namespace + "\x00" + string(t.ToolType) + "\x00" + t.ToolName})
		}
	}
	for i, name := range mcptool.Names(named) {
		t := mcptool.Tool(name, out[i].info)
		t.Description = "On device " + out[i].device + ": " + out[i].info.Description
		t.Title += " on " + out[i].device
		t.Annotations.Title = t.Title
		out[i].tool = t
	}
	return out, nil
}

// isMetaTool reports whether t is one of a device's meta tools
// (list_tools, install_tool), which a model has no use for directly.
func isMetaTool(t protocol.MCPToolInfo) bool {
	return t.Namespace == "computer" || t.ToolName == protocol.InstallToolName
}
