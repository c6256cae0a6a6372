// Package inventory is what the server knows of a device's tools when it
// resolves a task's calls for it (an [Inventory]: its live registration,
// or its last one while it is offline, and its link's wire), and that
// resolution: a [Call], as a plan or a command names its tool, becomes
// the command sent, held to the caller's scope, with what the audit log
// records of its tool. The front door (package tasks) resolves every
// step here before it sends it, and admission checks orders with the
// same lookups.
package inventory

import (
	"fmt"

	"github.com/edgeaip/edgeaip/internal/suggest"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
)

// Call is one action as a runner asks for it, before it is resolved
// against the device's inventory: the command to send, and the namespace
// a plan's "namespace.tool" named ("" for any).
type Call struct {
	Namespace string
	Cmd       protocol.Command
	// Path is where the request gave the action, e.g. "steps[2]",
	// "steps[3].actions[1]" or "actions[0]", and ToolField the field that
	// named its tool ("tool" or "tool_name"): admission's problems say
	// where they are.
	Path, ToolField string
}

// Label names the call as it was asked for: "namespace.tool", or the
// tool's name.
func (c Call) Label() string {
	if c.Namespace != "" {
		return c.Namespace + "." + c.Cmd.ToolName
	}
	return c.Cmd.ToolName
}

// Inventory is what the server knows of a device when it resolves calls
// for it: the tools of its live registration, or of its last one while it
// is offline, and the wire its live link speaks. It is a snapshot, so a
// whole batch (or, up front, a whole plan) resolves against one view.
type Inventory struct {
	DeviceID string
	// Tools are the tools its registration listed.
	Tools []protocol.MCPToolInfo
	// Online: it has a live link, whose registration Tools are.
	Online bool
	// UFOJSON: the live link speaks UFO's JSON, whose Command requires a
	// tool_type.
	UFOJSON bool
}

// ListsTools reports whether the device told the server its tools. UFO's
// device client lists none: such a device checks its commands itself.
func (inv Inventory) ListsTools() bool { return len(inv.Tools) > 0 }

// Encoding is the wire the device speaks: its live link's, else CBOR, our
// agent's, since the wire a device comes back on is not known before it
// does.
func (inv Inventory) Encoding() protocol.Encoding {
	if inv.UFOJSON {
		return protocol.JSON
	}
	return protocol.CBOR
}

// Lookup finds the tool c names, as the agent would.
func (inv Inventory) Lookup(c Call) (protocol.MCPToolInfo, bool) {
	return dispatch.FindTool(inv.Tools, c.Namespace, c.Cmd.ToolName, c.Cmd.ToolType)
}

// NoTool says that the device lacks the tool c names: as it is now, or as
// it last registered.
func (inv Inventory) NoTool(c Call) error {
	hint := suggest.DidYouMean(c.Label(), inv.toolLabels(c.Namespace != ""))
	if !inv.Online {
		return fmt.Errorf("device %q is offline, and its last registration listed no tool %q%s", inv.DeviceID, c.Label(), hint)
	}
	return fmt.Errorf("device %q has no tool %q%s", inv.DeviceID, c.Label(), hint)
}

// toolLabels names the device's tools as a call may name them: as
// "namespace.tool" if qualified, else by name.
func (inv Inventory) toolLabels(qualified bool) []string {
	labels := make([]string, len(inv.Tools))
	for i, t := range inv.Tools {
		labels[i] = t.ToolName
		if qualified && t.Namespace != "" {
			labels[i] = t.Namespace + "." + t.ToolName
		}
	}
	return labels
}

// Of is device deviceID's inventory as the dispatcher knows it now.
func Of(d *dispatch.Dispatcher, deviceID string) Inventory {
	t := d.Tools(deviceID)
	return Inventory{DeviceID: deviceID, Tools: t.Tools, Online: t.Online, UFOJSON: t.Online && t.Encoding == protocol.JSON}
}
