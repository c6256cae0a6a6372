package mcpgateway

import (
	"testing"

	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/stretchr/testify/assert"
)

// The access policy names the MCP gateway's tools by their names: each
// has a rule, or no one could call it.
func TestEveryMCPToolHasARule(t *testing.T) {
	for _, tool := range []string{mcpListDevices, mcpListDeviceTools, mcpCallDeviceTool, mcpDispatchPlan, mcpGetTask, mcpCancelTask, mcpDeviceTool} {
		_, ok := identity.RuleFor(identity.MCPKey(tool))
		assert.True(t, ok, tool)
	}
}
