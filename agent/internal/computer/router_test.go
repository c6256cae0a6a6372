package computer_test

import (
	"context"
	"testing"

	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Command Layer's semantics as UFO's Computer, ComputerManager and
// CommandRouter documents give them, one test each.

func execute(t *testing.T, r *computer.Router, target computer.Target, earlyExit bool, actions ...protocol.Command) []protocol.Result {
	t.Helper()
	res := r.Execute(context.Background(), target, actions, earlyExit)
	require.Len(t, res, len(actions))
	for i := range res {
		require.Equal(t, actions[i].CallID, res[i].CallID, "each Result carries its action's call_id")
	}
	return res
}

func toolKeys(t *testing.T, res protocol.Result) map[string]string {
	t.Helper()
	require.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
	keys := map[string]string{}
	for _, ti := range res.Result.([]protocol.MCPToolInfo) {
		keys[ti.ToolKey] = ti.Namespace
	}
	return keys
}

func TestRegistryIsKeyedByToolTypeAndToolNameAndEachDirIsANamespace(t *testing.T) {
	r := newTestRouter(t, nil, probeDirs(t)...)
	res := execute(t, r, computer.Target{}, true, action("list_tools", map[string]any{"remove_meta": false}))
	keys := toolKeys(t, res[0])
	assert.Equal(t, "probes", keys["data_collection::probe"], "the same name under both tool types")
	assert.Equal(t, "acts", keys["action::probe"])
	assert.Equal(t, "fixtures", keys["action::echo"])
	assert.Equal(t, computer.MetaNamespace, keys["data_collection::list_tools"])
	assert.Equal(t, computer.MetaNamespace, keys["action::list_tools"])
}

func TestCommand2ToolFindsTheToolTypeWhenTheCommandLeavesItOut(t *testing.T) {
	r := newTestRouter(t, nil, probeDirs(t)...)
	msg := map[string]any{"msg": "hi"}
	res := execute(t, r, computer.Target{}, true,
		action("probe", msg),
		protocol.Command{ToolName: "probe", ToolType: protocol.ToolAction, Parameters: msg, CallID: "typed"},
		action("echo", msg))
	assert.Equal(t, "probes", res[0].Namespace, "data_collection is tried first")
	assert.Equal(t, "acts", res[1].Namespace, "a given tool_type is honoured")
	assert.Equal(t, "fixtures", res[2].Namespace, "a tool found only as an action")
	assert.Equal(t, msg, res[0].Result)
}

func TestListToolsFiltersByToolTypeNamespaceAndMeta(t *testing.T) {
	r := newTestRouter(t, nil, probeDirs(t)...)
	res := execute(t, r, computer.Target{}, true,
		action("list_tools", nil),
		protocol.Command{ToolName: "list_tools", Parameters: map[string]any{"tool_type": "data_collection"}, CallID: "dc"},
		protocol.Command{ToolName: "list_tools", Parameters: map[string]any{"namespace": "acts", "remove_meta": false}, CallID: "ns"},
		protocol.Command{ToolName: "list_tools", Parameters: map[string]any{"tool_type": "action", "namespace": computer.MetaNamespace, "remove_meta": false}, CallID: "meta"})

	all := toolKeys(t, res[0])
	assert.Contains(t, all, "action::echo")
	assert.NotContains(t, all, "action::list_tools", "meta tools are removed by default")
	assert.Equal(t, map[string]string{"data_collection::probe": "probes", "data_collection::env": "fixtures"}, toolKeys(t, res[1]))
	assert.Equal(t, map[string]string{"action::probe": "acts"}, toolKeys(t, res[2]))
	assert.Equal(t, map[string]string{"action::list_tools": computer.MetaNamespace}, toolKeys(t, res[3]))
}

func TestActionsRunInOrderAndEarlyExitSkipsTheRest(t *testing.T) {
	r := newTestRouter(t, nil)
	actions := []protocol.Command{
		{ToolName: "echo", Parameters: map[string]any{"step": 1}, CallID: "c1"},
		{ToolName: "fail", CallID: "c2"},
		{ToolName: "echo", Parameters: map[string]any{"step": 3}, CallID: "c3"},
	}
	res := execute(t, r, computer.Target{}, true, actions...)
	assert.Equal(t, protocol.ResultSuccess, res[0].Status)
	assert.Equal(t, protocol.ResultFailure, res[1].Status)
	assert.Contains(t, res[1].Error, "disk on fire")
	assert.Equal(t, protocol.Result{Status: protocol.ResultSkipped, Error: "skipped due to previous failure", CallID: "c3"}, res[2])

	res = execute(t, r, computer.Target{}, false, actions...)
	assert.Equal(t, protocol.ResultFailure, res[1].Status)
	assert.Equal(t, protocol.ResultSuccess, res[2].Status, "without early exit every action runs")
	assert.Equal(t, map[string]any{"step": int64(3)}, res[2].Result)
}

func TestRouterValidatesBeforeItExecutes(t *testing.T) {
	r := newTestRouter(t, nil, probeDirs(t)...)
	dc := func(params map[string]any) protocol.Command {
		return protocol.Command{ToolName: "probe", ToolType: protocol.ToolDataCollection, Parameters: params, CallID: "probe"}
	}
	for name, tc := range map[string]struct {
		cmd  protocol.Command
		want string
	}{
		"unknown tool":       {action("no_such_tool", nil), `unknown tool "no_such_tool"`},
		"a typo":             {action("ehco", nil), `unknown tool "ehco"; did you mean echo?`},
		"unknown tool type":  {protocol.Command{ToolName: "echo", ToolType: protocol.ToolDataCollection, CallID: "x"}, `unknown tool "echo" of type data_collection`},
		"missing argument":   {dc(map[string]any{"n": 1}), `tool "probe": invalid parameters: parameter "msg": missing (required)`},
		"wrong type":         {dc(map[string]any{"msg": 7}), `tool "probe": invalid parameters: parameter "msg": got number, want string`},
		"unknown argument":   {dc(map[string]any{"msg": "x", "colour": "red"}), `tool "probe": invalid parameters: parameter "colour": not allowed`},
		"meta tool argument": {action("list_tools", map[string]any{"tool_type": "gadget"}), `tool "list_tools": invalid parameters: parameter "tool_type"`},
	} {
		t.Run(name, func(t *testing.T) {
			before := action("echo", map[string]any{"ran": true})
			res := execute(t, r, computer.Target{}, true, before, tc.cmd)
			assert.Equal(t, protocol.ResultFailure, res[1].Status)
			assert.Contains(t, res[1].Error, tc.want)
			assert.Equal(t, protocol.ResultSkipped, res[0].Status, "nothing of an invalid command runs")
			assert.Equal(t, "skipped due to previous failure: action 2 ("+tc.cmd.ToolName+") failed validation", res[0].Error)
			assert.Nil(t, res[0].Usage, "the sandbox never saw it")

			res = execute(t, r, computer.Target{}, false, before, tc.cmd)
			assert.Equal(t, protocol.ResultSuccess, res[0].Status, "without early exit valid actions still run")
			assert.Equal(t, protocol.ResultFailure, res[1].Status)
		})
	}
}

func TestEachWasmToolHasATimeout(t *testing.T) {
	r := newTestRouter(t, nil)
	res := execute(t, r, computer.Target{}, true, action("spin", nil))
	assert.Equal(t, protocol.ResultFailure, res[0].Status)
	assert.Contains(t, res[0].Error, `tool "spin": timed out after 1s`)
}

func TestAnAgentNameWithNoConfigGetsFailuresThatNameIt(t *testing.T) {
	r := newTestRouter(t, nil)
	res := execute(t, r, computer.Target{AgentName: "HostAgent", ProcessName: "explorer.exe"}, true,
		action("echo", nil), action("list_tools", nil))
	for _, x := range res {
		assert.Equal(t, protocol.ResultFailure, x.Status)
		assert.Equal(t, `agent_name "HostAgent" has no configuration on this device`, x.Error)
	}
	res = execute(t, r, computer.Target{AgentName: "default", RootName: "anything"}, true, action("echo", nil))
	assert.Equal(t, protocol.ResultSuccess, res[0].Status, "the default agent needs no config")
}
