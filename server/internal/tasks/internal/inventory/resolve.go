package inventory

import (
	"fmt"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/encodedonce"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// Resolve turns a step's calls into the commands sent, held to scope,
// and what the audit log records about each one's tool; it fails on the
// first call that cannot be sent.
func (inv Inventory) Resolve(calls []Call, scope access.Scope) ([]protocol.Command, []store.ToolRef, error) {
	cmds := make([]protocol.Command, len(calls))
	refs := make([]store.ToolRef, len(calls))
	for i, c := range calls {
		var err error
		if cmds[i], refs[i], err = inv.ResolveCall(c); err != nil {
			return nil, nil, err
		}
		if cmds[i], err = inv.Confine(c, cmds[i], scope); err != nil {
			return nil, nil, err
		}
	}
	return cmds, refs, nil
}

// Confine holds a resolved command to scope's tool patterns: the tool the
// agent will run for it, as dispatch.FindTool finds it, must be one the scope
// allows (a tool of no known type only by a pattern for any type), and
// the command then names its tool_type, so that the agent runs that tool
// and not another of the same name the device lists later. A tool outside
// the scope is refused as one the device does not have. install_tool is
// no tool of the patterns: its role, and the tool it installs, are
// admission's to check.
func (inv Inventory) Confine(c Call, cmd protocol.Command, scope access.Scope) (protocol.Command, error) {
	if len(scope.Tools) == 0 || cmd.ToolName == protocol.InstallToolName {
		return cmd, nil
	}
	if cmd.ToolType == "" {
		if t, found := dispatch.FindTool(inv.Tools, "", cmd.ToolName, ""); found {
			cmd.ToolType = t.ToolType
		}
	}
	if !scope.Tool(string(cmd.ToolType), cmd.ToolName) {
		return cmd, inv.NoTool(c)
	}
	return cmd, nil
}

// ResolveCall turns one call into the command sent: "namespace.tool" must
// name a tool the device has in that namespace, and is sent with that
// tool's tool_type so that the agent runs exactly it (the agent keys tools
// by tool_type::tool_name). A bare name is sent as is, with the tool_type
// filled in where the device's wire requires one.
func (inv Inventory) ResolveCall(c Call) (protocol.Command, store.ToolRef, error) {
	a := c.Cmd
	cmd := protocol.Command{ToolName: a.ToolName, ToolType: a.ToolType, Parameters: a.Parameters}
	t, found := inv.Lookup(c)
	switch {
	case c.Namespace != "" && !found:
		return cmd, store.ToolRef{}, inv.NoTool(c)
	case c.Namespace != "":
		cmd.ToolType = t.ToolType
	case a.ToolType == "" && inv.UFOJSON:
		// UFO's Command requires tool_type, which our agent finds itself
		// but a UFO device does not.
		if !found {
			return cmd, store.ToolRef{}, fmt.Errorf("device %q speaks UFO's JSON and does not list %q: give its tool_type (data_collection or action)", inv.DeviceID, c.Label())
		}
		cmd.ToolType = t.ToolType
	case a.ToolType == "" && !inv.Online && found:
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
