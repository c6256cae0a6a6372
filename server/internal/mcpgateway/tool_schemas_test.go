package mcpgateway

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/wasmtools/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonFields are the JSON names of t's fields, its embedded structs'
// included.
func jsonFields(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && name == "":
			for n := range jsonFields(f.Type) {
				out[n] = true
			}
		case name != "-" && name != "":
			out[name] = true
		}
	}
	return out
}

// properties are the names schema s declares.
func properties(s map[string]any) []string {
	var out []string
	for name := range s["properties"].(map[string]any) {
		out = append(out, name)
	}
	return out
}

// Each output schema names only fields of the Go type its answer is
// made from, so that a field renamed there fails here, not in a client.
func TestTheOutputSchemasNameTheFieldsOfTheirTypes(t *testing.T) {
	for name, tc := range map[string]struct {
		schema map[string]any
		typ    reflect.Type
	}{
		"task":        {taskSchema, reflect.TypeFor[api.Task]()},
		"device":      {devicesSchema["properties"].(map[string]any)["devices"].(map[string]any)["items"].(map[string]any), reflect.TypeFor[deviceSummary]()},
		"device tool": {deviceToolsSchema["properties"].(map[string]any)["tools"].(map[string]any)["items"].(map[string]any), reflect.TypeFor[toolSummary]()},
	} {
		fields := jsonFields(tc.typ)
		for _, p := range properties(tc.schema) {
			assert.True(t, fields[p], "%s: %q is no field of %s", name, p, tc.typ)
		}
	}
}

// A task as get_task answers it, every field set, matches the task's
// output schema; so do the other answers.
func TestAnswersMatchTheirOutputSchemas(t *testing.T) {
	now := time.Now()
	task := api.Task{
		TaskSummary: api.TaskSummary{SessionID: "s-1", TaskName: "t", DeviceID: "kiosk-1", Requester: api.Requester{Kind: api.RequesterMCP, Identity: "ann"},
			Kind: api.KindCommand, ParentID: "f-1", State: api.StateCancelled, CreatedAt: now, StartedAt: &now, FinishedAt: &now},
		Plan: json.RawMessage(`{"steps":[]}`), Result: json.RawMessage(`{"status":"failure"}`), Error: "task cancelled on request",
		Commands: []api.CommandRecord{{}}, OriginalTaskName: "galaxy/t",
	}
	for name, tc := range map[string]struct {
		schema map[string]any
		answer any
	}{
		"get_task":               {taskSchema, task},
		"dispatch_plan":          {planSchema, task},
		"dispatch_plan, started": {planSchema, map[string]any{"session_id": "s-1", "task_name": "t", "url": "http://s/api/tasks/s-1"}},
		"list_devices": {devicesSchema, map[string]any{"devices": []deviceSummary{{ID: "kiosk-1", Online: true, Labels: map[string]string{"site": "lobby"},
			Platform: "linux", Arch: "arm64", Tools: 3}}}},
		"list_device_tools": {deviceToolsSchema, map[string]any{"device": "kiosk-1", "tools": []toolSummary{{Name: "echo", ToolType: "action",
			Namespace: "stock", Description: "d", InputSchema: map[string]any{"type": "object"}}}}},
	} {
		v, err := schema.Compile(tc.schema)
		require.NoError(t, err, name)
		b, err := json.Marshal(tc.answer)
		require.NoError(t, err)
		assert.NoError(t, v.Validate(b), name)
	}
}
