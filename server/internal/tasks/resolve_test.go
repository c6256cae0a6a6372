package tasks

import (
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/servertest"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/plan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResolvingACallAgainstAnInventory(t *testing.T) {
	tools := []protocol.MCPToolInfo{tool("stock", "hash_file", protocol.ToolDataCollection), tool("browser", "navigate", protocol.ToolAction)}
	params := map[string]any{"path": "/etc/hostname"}
	cbor := Inventory{deviceID: "kiosk-1", tools: tools, online: true}
	ufo := Inventory{deviceID: "kiosk-1", tools: tools, online: true, ufoJSON: true}
	offline := Inventory{deviceID: "kiosk-1", tools: tools}
	for name, tc := range map[string]struct {
		inv  Inventory
		call toolCall
		want protocol.Command
		ref  store.ToolRef
		err  string
	}{
		"a namespace picks the tool and its type": {cbor, toolCall{namespace: "stock", cmd: protocol.Command{ToolName: "hash_file", Parameters: params}},
			protocol.Command{ToolName: "hash_file", ToolType: protocol.ToolDataCollection, Parameters: params}, store.ToolRef{Namespace: "stock", SHA256: "sha-of-hash_file"}, ""},
		"a namespace the tool is not in": {cbor, toolCall{namespace: "browser", cmd: protocol.Command{ToolName: "hash_file"}},
			protocol.Command{}, store.ToolRef{}, `device "kiosk-1" has no tool "browser.hash_file"`},
		"offline, the last registration tells": {offline, toolCall{namespace: "stock", cmd: protocol.Command{ToolName: "nope"}},
			protocol.Command{}, store.ToolRef{}, `device "kiosk-1" is offline, and its last registration listed no tool "stock.nope"`},
		"a bare name goes as it is, call_id and all dropped": {cbor, toolCall{cmd: protocol.Command{ToolName: "hash_file", CallID: "mine"}},
			protocol.Command{ToolName: "hash_file"}, store.ToolRef{Namespace: "stock", SHA256: "sha-of-hash_file"}, ""},
		"a tool the device does not list goes as it is": {cbor, toolCall{cmd: protocol.Command{ToolName: "other"}},
			protocol.Command{ToolName: "other"}, store.ToolRef{}, ""},
		"UFO's wire needs a tool_type": {ufo, toolCall{cmd: protocol.Command{ToolName: "navigate"}},
			protocol.Command{ToolName: "navigate", ToolType: protocol.ToolAction}, store.ToolRef{Namespace: "browser", SHA256: "sha-of-navigate"}, ""},
		"UFO's wire and a tool not listed": {ufo, toolCall{cmd: protocol.Command{ToolName: "other"}},
			protocol.Command{}, store.ToolRef{}, `device "kiosk-1" speaks UFO's JSON and does not list "other": give its tool_type (data_collection or action)`},
		"offline, the type is filled in for either wire": {offline, toolCall{cmd: protocol.Command{ToolName: "navigate"}},
			protocol.Command{ToolName: "navigate", ToolType: protocol.ToolAction}, store.ToolRef{Namespace: "browser", SHA256: "sha-of-navigate"}, ""},
		"install_tool is audited by the module it installs": {cbor, toolCall{cmd: protocol.Command{ToolName: protocol.InstallToolName, Parameters: map[string]any{"sha256": "abc"}}},
			protocol.Command{ToolName: protocol.InstallToolName, Parameters: map[string]any{"sha256": "abc"}}, store.ToolRef{SHA256: "abc"}, ""},
	} {
		cmd, ref, err := tc.inv.resolveCall(tc.call)
		if tc.err != "" {
			assert.EqualError(t, err, tc.err, name)
			continue
		}
		require.NoError(t, err, name)
		assert.Equal(t, tc.want, cmd, name)
		assert.Equal(t, tc.ref, ref, name)
	}
}

func TestABatchResolvesWholeOrNotAtAll(t *testing.T) {
	inv := Inventory{deviceID: "kiosk-1", tools: []protocol.MCPToolInfo{tool("stock", "echo", protocol.ToolAction)}, online: true}
	cmds, refs, err := inv.resolve([]toolCall{{namespace: "stock", cmd: protocol.Command{ToolName: "echo"}}, {cmd: protocol.Command{ToolName: "x"}}}, access.Scope{})
	require.NoError(t, err)
	assert.Equal(t, []protocol.Command{{ToolName: "echo", ToolType: protocol.ToolAction}, {ToolName: "x"}}, cmds)
	assert.Equal(t, []store.ToolRef{{Namespace: "stock", SHA256: "sha-of-echo"}, {}}, refs)
	_, _, err = inv.resolve([]toolCall{{namespace: "stock", cmd: protocol.Command{ToolName: "echo"}}, {namespace: "stock", cmd: protocol.Command{ToolName: "x"}}}, access.Scope{})
	assert.EqualError(t, err, `device "kiosk-1" has no tool "stock.x"`)
}

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
	assert.Equal(t, []toolCall{
		{cmd: protocol.Command{ToolName: "read_file", Parameters: map[string]any{"path": "/etc/hostname"}}, path: "steps[2].actions[0]", toolField: "tool"},
		{namespace: "browser", cmd: protocol.Command{ToolName: "a.b"}, path: "steps[2].actions[1]", toolField: "tool"},
	}, st.calls)
	assert.Equal(t, "steps[2]", st.path)
	assert.Equal(t, toolCall{cmd: protocol.Command{ToolName: "my.dotted.tool", ToolType: protocol.ToolAction}, path: "steps[1]", toolField: "tool_name"},
		planStep(1, p.Steps[1]).calls[0], "tool_name is taken literally")
}

var (
	tool                 = servertest.Tool
	testAdmin            = servertest.Admin
	inventoryWithSchemas = servertest.ToolsWithSchemas
)
