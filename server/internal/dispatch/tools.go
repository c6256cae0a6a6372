package dispatch

import (
	"encoding/json"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// FindTool looks a tool up as the agent would: by tool_type::tool_name, or
// when no type is given, under each type in turn; a namespace, if given,
// must match too.
func FindTool(tools []protocol.MCPToolInfo, ns, name string, tt protocol.ToolType) (protocol.MCPToolInfo, bool) {
	types := protocol.ToolTypes[:]
	if tt != "" {
		types = []protocol.ToolType{tt}
	}
	for _, want := range types {
		for _, t := range tools {
			if t.ToolName == name && t.ToolType == want && (ns == "" || t.Namespace == ns) {
				return t, true
			}
		}
	}
	return protocol.MCPToolInfo{}, false
}

// StoredInfo is the system info of a device's last registration, or nil
// if it never sent one that reads.
func StoredInfo(d store.Device) *protocol.SystemInfo {
	if d.Info == nil {
		return nil
	}
	var info protocol.SystemInfo
	if json.Unmarshal(d.Info, &info) != nil {
		return nil
	}
	return &info
}
