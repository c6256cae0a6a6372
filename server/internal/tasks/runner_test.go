package tasks

import (
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/servertest"
	"github.com/edgeaip/edgeaip/server/internal/tasks/internal/inventory"
	"github.com/edgeaip/edgeaip/server/plan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAPlanStepIsNamedAndSplitAsThePlanSaysIt(t *testing.T) {
	p, err := plan.Parse([]byte(`
steps:
  - tool: stock.hash_file
  - tool_name: my.dotted.tool
    tool_type: action
  - actions:
      - {tool: read_file, parameters: {path: /etc/hostname}}
      - {tool: browser.a.b}
`))
	require.NoError(t, err)
	for i, ps := range p.Steps {
		assert.Equal(t, ps.Label(), planStep(i, ps).label())
	}
	st := planStep(2, p.Steps[2])
	assert.Equal(t, []inventory.Call{
		{Cmd: protocol.Command{ToolName: "read_file", Parameters: map[string]any{"path": "/etc/hostname"}}, Path: "steps[2].actions[0]", ToolField: "tool"},
		{Namespace: "browser", Cmd: protocol.Command{ToolName: "a.b"}, Path: "steps[2].actions[1]", ToolField: "tool"},
	}, st.calls)
	assert.Equal(t, "steps[2]", st.path)
	assert.Equal(t, inventory.Call{Cmd: protocol.Command{ToolName: "my.dotted.tool", ToolType: protocol.ToolAction}, Path: "steps[1]", ToolField: "tool_name"},
		planStep(1, p.Steps[1]).calls[0], "tool_name is taken literally")
}

var (
	tool                 = servertest.Tool
	testAdmin            = servertest.Admin
	inventoryWithSchemas = servertest.ToolsWithSchemas
)
