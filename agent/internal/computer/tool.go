// Package computer is UFO's Command Layer on the device: a Computer is a
// registry of tools keyed "tool_type::tool_name"; the Manager (UFO's
// ComputerManager) holds one Computer per agent_name::process_name::
// root_name, with the device's wasm tools and the tools of the MCP
// servers its config names; the Router (UFO's CommandRouter) checks a
// command's actions against the tools' input schemas and executes them in
// order, skipping the rest after a failure (early exit).
package computer

import (
	"context"

	"github.com/edgeaip/edgeaip/protocol"
)

// Tool is anything a Computer can call: a wasm module, a tool of a proxied
// MCP server, or a meta tool. Each enforces its own timeout.
type Tool interface {
	Info() protocol.MCPToolInfo
	Call(ctx context.Context, params map[string]any) protocol.Result
}

// Failure is the Result of a call that failed with err.
func Failure(err error) protocol.Result {
	return protocol.Result{Status: protocol.ResultFailure, Error: err.Error()}
}

// MetaToolInfo describes an action meta tool, one that changes the
// device rather than acts through it: install_tool and the tools of
// rollouts and agent updates.
func MetaToolInfo(name, title, description string, schema map[string]any) protocol.MCPToolInfo {
	return protocol.MCPToolInfo{
		ToolKey:     protocol.ToolKey(protocol.ToolAction, name),
		ToolName:    name,
		Namespace:   MetaNamespace,
		ToolType:    protocol.ToolAction,
		Title:       title,
		Description: description,
		InputSchema: schema,
	}
}
