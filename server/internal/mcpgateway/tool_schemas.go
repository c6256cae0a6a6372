package mcpgateway

import (
	"encoding/json"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/mark3labs/mcp-go/mcp"
)

// The gateway's tools' output schemas: what their structuredContent
// holds, for clients that check it (the TypeScript SDK does, on every
// call). They name the fields a client relies on and leave the rest
// open, so that a field added to the API's answer breaks no client;
// tool_schemas_test.go holds them to the Go types they describe.
var (
	// taskSchema is an api.Task: get_task's and cancel_task's answer.
	taskSchema = object(map[string]any{
		"session_id": str, "task_name": str, "device_id": str, "kind": str, "parent_id": str,
		"requester": map[string]any{"type": "object"},
		"state": map[string]any{"type": "string", "enum": []api.TaskState{api.StateCreated, api.StateRunning,
			api.StateCompleted, api.StateFailed, api.StateCancelled}},
		"created_at": str, "started_at": str, "finished_at": str,
		"plan": anything, "result": anything, "error": str, "original_task_name": str,
		"commands": map[string]any{"type": "array"},
	}, "session_id", "state")
	// startedSchema is dispatch_plan's answer with wait false.
	startedSchema = object(map[string]any{"session_id": str, "task_name": str, "url": str}, "session_id", "url")
	// planSchema is dispatch_plan's answer: the task, or with wait false
	// where to follow it. An outputSchema's root is an object, for MCP.
	planSchema = map[string]any{"type": "object", "anyOf": []any{taskSchema, startedSchema}}
	// devicesSchema is list_devices' answer.
	devicesSchema = object(map[string]any{"devices": arrayOf(object(map[string]any{
		"id": str, "online": boolean, "labels": map[string]any{"type": "object", "additionalProperties": str},
		"platform": str, "arch": str, "tools": integer,
	}, "id", "online", "tools"))}, "devices")
	// deviceToolsSchema is list_device_tools' answer.
	deviceToolsSchema = object(map[string]any{"device": str, "tools": arrayOf(object(map[string]any{
		"name": str, "tool_type": str, "namespace": str, "description": str,
		"input_schema": map[string]any{"type": "object"},
	}, "name", "tool_type"))}, "device", "tools")
)

var (
	str      = map[string]any{"type": "string"}
	boolean  = map[string]any{"type": "boolean"}
	integer  = map[string]any{"type": "integer"}
	anything = map[string]any{}
)

// object is the schema of an object with properties, of which required
// must be there; others may be too.
func object(properties map[string]any, required ...string) map[string]any {
	return map[string]any{"type": "object", "properties": properties, "required": required}
}

func arrayOf(items map[string]any) map[string]any {
	return map[string]any{"type": "array", "items": items}
}

// outputSchema declares schema as a tool's outputSchema. The schemas
// above are all strings, booleans and maps, which marshal; a test holds
// every tool to having one.
func outputSchema(schema map[string]any) mcp.ToolOption {
	b, _ := json.Marshal(schema)
	return mcp.WithRawOutputSchema(b)
}

// hints sets every annotation of a tool, none left to mcp-go's defaults
// (which make a tool destructive and open-world): readOnly tools read
// the server's own records; the others may change a device, or stop
// what runs on one.
func hints(title string, readOnly, destructive, idempotent, openWorld bool) mcp.ToolOption {
	return func(t *mcp.Tool) {
		t.Title = title
		t.Annotations = mcp.ToolAnnotation{Title: title, ReadOnlyHint: &readOnly, DestructiveHint: &destructive,
			IdempotentHint: &idempotent, OpenWorldHint: &openWorld}
	}
}
