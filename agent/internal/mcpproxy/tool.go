package mcpproxy

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/mark3labs/mcp-go/mcp"
)

// Tool is one tool of a proxied MCP server, under the server's namespace,
// with the tool type its subscriber asked for.
type Tool struct {
	server *Server
	desc   protocol.MCPToolInfo
}

func newTool(s *Server, def mcp.Tool, toolType protocol.ToolType) *Tool {
	return &Tool{server: s, desc: protocol.MCPToolInfo{
		ToolKey:      protocol.ToolKey(toolType, def.Name),
		ToolName:     def.Name,
		Namespace:    s.cfg.Namespace,
		ToolType:     toolType,
		Title:        def.Title,
		Description:  def.Description,
		InputSchema:  jsonObject(def.InputSchema, def.RawInputSchema),
		OutputSchema: outputSchema(def),
		Annotations:  jsonObject(def.Annotations, nil),
	}}
}

// outputSchema is the tool's output schema, if it declares one: mcp-go
// gives a tool without one an empty schema.
func outputSchema(def mcp.Tool) map[string]any {
	if def.OutputSchema.Type == "" && len(def.RawOutputSchema) == 0 {
		return nil
	}
	return jsonObject(def.OutputSchema, def.RawOutputSchema)
}

// Info describes the tool as the device lists it.
func (t *Tool) Info() protocol.MCPToolInfo { return t.desc }

// Call calls the tool on its server, within the server's call timeout.
func (t *Tool) Call(ctx context.Context, params map[string]any) protocol.Result {
	return t.server.call(ctx, t.desc.ToolName, params)
}

// jsonObject is v as a plain JSON object, or raw when it is set; nil when
// empty. MCP schemas and annotations travel on our wire as such objects.
func jsonObject(v any, raw json.RawMessage) map[string]any {
	var m map[string]any
	if protocol.JSON.UnmarshalValue(jsonBytes(raw, v), &m) != nil || len(m) == 0 {
		return nil
	}
	return m
}

// toolResult maps an MCP tool result onto a Result: isError is a failure
// carrying the text; otherwise the structured content, else the content,
// where text that parses as JSON is that JSON and anything else (an image,
// say) is its MCP form, e.g. {type: image, data: <base64>, mimeType}.
func toolResult(r *mcp.CallToolResult) protocol.Result {
	if r.IsError {
		msg := strings.TrimSpace(contentText(r.Content))
		if msg == "" {
			msg = "the tool reported an error without a message"
		}
		return protocol.Result{Status: protocol.ResultFailure, Error: msg}
	}
	if v, ok := structured(r); ok {
		return protocol.Result{Status: protocol.ResultSuccess, Result: v}
	}
	if len(r.Content) == 1 {
		return protocol.Result{Status: protocol.ResultSuccess, Result: contentValue(r.Content[0])}
	}
	items := make([]any, len(r.Content))
	for i, c := range r.Content {
		items[i] = contentValue(c)
	}
	return protocol.Result{Status: protocol.ResultSuccess, Result: items}
}

func structured(r *mcp.CallToolResult) (any, bool) {
	if len(r.RawStructuredContent) == 0 && r.StructuredContent == nil {
		return nil, false
	}
	var v any
	if err := protocol.JSON.UnmarshalValue(jsonBytes(r.RawStructuredContent, r.StructuredContent), &v); err != nil || v == nil {
		return nil, false
	}
	return v, true
}

func contentValue(c mcp.Content) any {
	if t, ok := c.(mcp.TextContent); ok {
		var v any
		if protocol.JSON.UnmarshalValue([]byte(t.Text), &v) == nil {
			return v
		}
		return t.Text
	}
	var v any
	if err := protocol.JSON.UnmarshalValue(jsonBytes(nil, c), &v); err != nil {
		return nil
	}
	return v
}

func contentText(cs []mcp.Content) string {
	var parts []string
	for _, c := range cs {
		if t, ok := c.(mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// jsonBytes is raw when set, else v encoded as JSON (nothing if it cannot
// be: the caller's decode then fails and it falls back).
func jsonBytes(raw json.RawMessage, v any) []byte {
	if len(raw) > 0 {
		return raw
	}
	b, _ := json.Marshal(v)
	return b
}
