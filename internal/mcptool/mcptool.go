// Package mcptool is how a device's tools and their Results look to an
// MCP client, for the two places that serve them over MCP: the server's
// gateway (/mcp) and the agent's own endpoint (mcp_serve). It names tools
// as many clients require, describes them with their schemas and hints,
// and turns an AIP Result into a CallToolResult.
package mcptool

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/mark3labs/mcp-go/mcp"
)

// Tool describes info to an MCP client under name: its title (the tool's
// name if it declares none), its description, its input schema as the
// device declared it, its output schema (the AIP Result, whose result is
// the tool's own output: ResultSchema), and the hints that follow from
// its tool type (a data_collection tool reads, an action tool may
// change things).
func Tool(name string, info protocol.MCPToolInfo) mcp.Tool {
	title := cmp.Or(info.Title, info.ToolName)
	t := mcp.Tool{Name: name, Title: title, Description: info.Description}
	t.RawInputSchema = inputSchema(info.InputSchema)
	t.RawOutputSchema = ResultSchema(info.OutputSchema)
	t.Annotations.Title = title
	readOnly := info.ToolType == protocol.ToolDataCollection
	t.Annotations.ReadOnlyHint = &readOnly
	destructive := info.ToolType == protocol.ToolAction
	t.Annotations.DestructiveHint = &destructive
	return t
}

// inputSchema is s as JSON; a tool that declares none takes any object,
// which is what the device checks it against.
func inputSchema(s map[string]any) json.RawMessage {
	if len(s) > 0 {
		if b, err := json.Marshal(s); err == nil {
			return b
		}
	}
	return json.RawMessage(`{"type":"object"}`)
}

// shortHash is the first 8 hex digits of the SHA-256 of key.
func shortHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:4])
}
