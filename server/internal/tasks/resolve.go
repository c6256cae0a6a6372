package tasks

import (
	"fmt"

	"github.com/edgeaip/edgeaip/internal/suggest"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/encodedonce"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// toolCall is one action as a runner asks for it, before it is resolved
// against the device's inventory: the command to send, and the namespace
// a plan's "namespace.tool" named ("" for any).
type toolCall struct {
	namespace string
	cmd       protocol.Command
	// path is where the request gave the action, e.g. "steps[2]",
	// "steps[3].actions[1]" or "actions[0]", and toolField the field that
	// named its tool ("tool" or "tool_name"): admission's problems say
	// where they are.
	path, toolField string
}

// label names the call as it was asked for: "namespace.tool", or the
// tool's name.
func (c toolCall) label() string {
	if c.namespace != "" {
		return c.namespace + "." + c.cmd.ToolName
	}
	return c.cmd.ToolName
}

// Inventory is what the server knows of a device when it resolves calls
// for it: the tools of its live registration, or of its last one while it
// is offline, and the wire its live link speaks. It is a snapshot, so a
// whole batch (or, up front, a whole plan) resolves against one view.
type Inventory struct {
	deviceID string
	tools    []protocol.MCPToolInfo
	online   bool
	// ufoJSON: the live link speaks UFO's JSON, whose Command requires a
	// tool_type.
	ufoJSON bool
}

// listsTools reports whether the device told the server its tools. UFO's
// device client lists none: such a device checks its commands itself.
func (inv Inventory) listsTools() bool { return len(inv.tools) > 0 }

// encoding is the wire the device speaks: its live link's, else CBOR, our
// agent's, since the wire a device comes back on is not known before it
// does.
func (inv Inventory) encoding() protocol.Encoding {
	if inv.ufoJSON {
		return protocol.JSON
	}
	return protocol.CBOR
}

// lookup finds the tool c names, as the agent would.
func (inv Inventory) lookup(c toolCall) (protocol.MCPToolInfo, bool) {
	return dispatch.FindTool(inv.tools, c.namespace, c.cmd.ToolName, c.cmd.ToolType)
}

// noTool says that the device lacks the tool c names: as it is now, or as
// it last registered.
func (inv Inventory) noTool(c toolCall) error {
	hint := suggest.DidYouMean(c.label(), inv.toolLabels(c.namespace != ""))
	if !inv.online {
		return fmt.Errorf("device %q is offline, and its last registration listed no tool %q%s", inv.deviceID, c.label(), hint)
	}
	return fmt.Errorf("device %q has no tool %q%s", inv.deviceID, c.label(), hint)
}

// toolLabels names the device's tools as a call may name them: as
// "namespace.tool" if qualified, else by name.
func (inv Inventory) toolLabels(qualified bool) []string {
	labels := make([]string, len(inv.tools))
	for i, t := range inv.tools {
		labels[i] = t.ToolName
		if qualified && t.Namespace != "" {
			labels[i] = t.Namespace + "." + t.ToolName
		}
	}
	return labels
}

// InventoryOf is device deviceID's inventory as the dispatcher knows it
// now.
func InventoryOf(d *dispatch.Dispatcher, deviceID string) Inventory {
	t := d.Tools(deviceID)
	return Inventory{deviceID: deviceID, tools: t.Tools, online: t.Online, ufoJSON: t.Online && t.Encoding == protocol.JSON}
}

// resolve turns a step's calls into the commands sent, held to scope,
// and what the audit log records about each one's tool; it fails on the
// first call that cannot be sent.
func (inv Inventory) resolve(calls []toolCall, scope access.Scope) ([]protocol.Command, []store.ToolRef, error) {
	cmds := make([]protocol.Command, len(calls))
	refs := make([]store.ToolRef, len(calls))
	for i, c := range calls {
		var err error
		if cmds[i], refs[i], err = inv.resolveCall(c); err != nil {
			return nil, nil, err
		}
		if cmds[i], err = inv.confine(c, cmds[i], scope); err != nil {
			return nil, nil, err
		}
	}
	return cmds, refs, nil
}

// confine holds a resolved command to scope's tool patterns: the tool the
// agent will run for it, as dispatch.FindTool finds it, must be one the scope
// allows (a tool of no known type only by a pattern for any type), and
// the command then names its tool_type, so that the agent runs that tool
// and not another of the same name the device lists later. A tool outside
// the scope is refused as one the device does not have. install_tool is
// no tool of the patterns: its role, and the tool it installs, are
// admission's to check.
func (inv Inventory) confine(c toolCall, cmd protocol.Command, scope access.Scope) (protocol.Command, error) {
	if len(scope.Tools) == 0 || cmd.ToolName == protocol.InstallToolName {
		return cmd, nil
	}
	if cmd.ToolType == "" {
		if t, found := dispatch.FindTool(inv.tools, "", cmd.ToolName, ""); found {
			cmd.ToolType = t.ToolType
		}
	}
	if !scope.Tool(string(cmd.ToolType), cmd.ToolName) {
		return cmd, inv.noTool(c)
	}
	return cmd, nil
}

// resolveCall turns one call into the command sent: "namespace.tool" must
// name a tool the device has in that namespace, and is sent with that
// tool's tool_type so that the agent runs exactly it (the agent keys tools
// by tool_type::tool_name). A bare name is sent as is, with the tool_type
// filled in where the device's wire requires one.
func (inv Inventory) resolveCall(c toolCall) (protocol.Command, store.ToolRef, error) {
	a := c.cmd
	cmd := protocol.Command{ToolName: a.ToolName, ToolType: a.ToolType, Parameters: a.Parameters}
	t, found := inv.lookup(c)
	switch {
	case c.namespace != "" && !found:
		return cmd, store.ToolRef{}, inv.noTool(c)
	case c.namespace != "":
		cmd.ToolType = t.ToolType
	case a.ToolType == "" && inv.ufoJSON:
		// UFO's Command requires tool_type, which our agent finds itself
		// but a UFO device does not.
		if !found {
			return cmd, store.ToolRef{}, fmt.Errorf("device %q speaks UFO's JSON and does not list %q: give its tool_type (data_collection or action)", inv.deviceID, c.label())
		}
		cmd.ToolType = t.ToolType
	case a.ToolType == "" && !inv.online && found:
		// Which wire the device comes back on is not known yet: UFO's
		// requires the tool_type, and our agent takes it.
		cmd.ToolType = t.ToolType
	}
	var ref store.ToolRef
	if found {
		ref = store.ToolRef{Namespace: t.Namespace, SHA256: toolSHA256(t)}
	}
	if protocol.CarriesModule(a.ToolName) {
		// The module that matters is the one being installed.
		ref.SHA256, _ = encodedonce.Unwrap(a.Parameters["sha256"]).(string)
	}
	return cmd, ref, nil
}

// toolSHA256 is the module hash the agent reports in a tool's meta.
func toolSHA256(t protocol.MCPToolInfo) string {
	s, _ := t.Meta["sha256"].(string)
	return s
}
