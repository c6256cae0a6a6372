package inventory

import (
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/servertest"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResolvingACallAgainstAnInventory(t *testing.T) {
	tools := []protocol.MCPToolInfo{tool("stock", "hash_file", protocol.ToolDataCollection), tool("browser", "navigate", protocol.ToolAction)}
	params := map[string]any{"path": "/etc/hostname"}
	cbor := Inventory{DeviceID: "kiosk-1", Tools: tools, Online: true}
	ufo := Inventory{DeviceID: "kiosk-1", Tools: tools, Online: true, UFOJSON: true}
	offline := Inventory{DeviceID: "kiosk-1", Tools: tools}
	for name, tc := range map[string]struct {
		inv  Inventory
		call Call
		want protocol.Command
		ref  store.ToolRef
		err  string
	}{
		"a namespace picks the tool and its type": {cbor, Call{Namespace: "stock", Cmd: protocol.Command{ToolName: "hash_file", Parameters: params}},
			protocol.Command{ToolName: "hash_file", ToolType: protocol.ToolDataCollection, Parameters: params}, store.ToolRef{Namespace: "stock", SHA256: "sha-of-hash_file"}, ""},
		"a namespace the tool is not in": {cbor, Call{Namespace: "browser", Cmd: protocol.Command{ToolName: "hash_file"}},
			protocol.Command{}, store.ToolRef{}, `device "kiosk-1" has no tool "browser.hash_file"`},
		"offline, the last registration tells": {offline, Call{Namespace: "stock", Cmd: protocol.Command{ToolName: "nope"}},
			protocol.Command{}, store.ToolRef{}, `device "kiosk-1" is offline, and its last registration listed no tool "stock.nope"`},
		"a bare name goes as it is, call_id and all dropped": {cbor, Call{Cmd: protocol.Command{ToolName: "hash_file", CallID: "mine"}},
			protocol.Command{ToolName: "hash_file"}, store.ToolRef{Namespace: "stock", SHA256: "sha-of-hash_file"}, ""},
		"a tool the device does not list goes as it is": {cbor, Call{Cmd: protocol.Command{ToolName: "other"}},
			protocol.Command{ToolName: "other"}, store.ToolRef{}, ""},
		"UFO's wire needs a tool_type": {ufo, Call{Cmd: protocol.Command{ToolName: "navigate"}},
			protocol.Command{ToolName: "navigate", ToolType: protocol.ToolAction}, store.ToolRef{Namespace: "browser", SHA256: "sha-of-navigate"}, ""},
		"UFO's wire and a tool not listed": {ufo, Call{Cmd: protocol.Command{ToolName: "other"}},
			protocol.Command{}, store.ToolRef{}, `device "kiosk-1" speaks UFO's JSON and does not list "other": give its tool_type (data_collection or action)`},
		"offline, the type is filled in for either wire": {offline, Call{Cmd: protocol.Command{ToolName: "navigate"}},
			protocol.Command{ToolName: "navigate", ToolType: protocol.ToolAction}, store.ToolRef{Namespace: "browser", SHA256: "sha-of-navigate"}, ""},
		"install_tool is audited by the module it installs": {cbor, Call{Cmd: protocol.Command{ToolName: protocol.InstallToolName, Parameters: map[string]any{"sha256": "abc"}}},
			protocol.Command{ToolName: protocol.InstallToolName, Parameters: map[string]any{"sha256": "abc"}}, store.ToolRef{SHA256: "abc"}, ""},
	} {
		cmd, ref, err := tc.inv.ResolveCall(tc.call)
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
	inv := Inventory{DeviceID: "kiosk-1", Tools: []protocol.MCPToolInfo{tool("stock", "echo", protocol.ToolAction)}, Online: true}
	cmds, refs, err := inv.Resolve([]Call{{Namespace: "stock", Cmd: protocol.Command{ToolName: "echo"}}, {Cmd: protocol.Command{ToolName: "x"}}}, access.Scope{})
	require.NoError(t, err)
	assert.Equal(t, []protocol.Command{{ToolName: "echo", ToolType: protocol.ToolAction}, {ToolName: "x"}}, cmds)
	assert.Equal(t, []store.ToolRef{{Namespace: "stock", SHA256: "sha-of-echo"}, {}}, refs)
	_, _, err = inv.Resolve([]Call{{Namespace: "stock", Cmd: protocol.Command{ToolName: "echo"}}, {Namespace: "stock", Cmd: protocol.Command{ToolName: "x"}}}, access.Scope{})
	assert.EqualError(t, err, `device "kiosk-1" has no tool "stock.x"`)
}

var tool = servertest.Tool
