// Package servertest holds what the server's tests and its parts' tests
// share: an unscoped admin to ask as, and devices' tools as their
// REGISTER lists them.
package servertest

import (
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/identity"
)

// Admin is an unscoped admin, for what tests call below the API.
var Admin = &identity.Caller{Name: identity.BootstrapIdentity, Role: access.Admin}

// Tool is a device's tool named name, of type tt, in namespace ns, as its
// REGISTER lists it, with a sha256 of its own.
func Tool(ns, name string, tt protocol.ToolType) protocol.MCPToolInfo {
	return protocol.MCPToolInfo{ToolKey: protocol.ToolKey(tt, name), ToolName: name, Namespace: ns, ToolType: tt,
		Meta: map[string]any{"sha256": "sha-of-" + name}}
}

// ToolsWithSchemas is a device's tools: hash_file takes a path, echo
// takes anything.
func ToolsWithSchemas() []protocol.MCPToolInfo {
	hash := Tool("stock", "hash_file", protocol.ToolDataCollection)
	hash.InputSchema = map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"path": map[string]any{"type": "string"}},
		"required":             []any{"path"},
		"additionalProperties": false,
	}
	return []protocol.MCPToolInfo{hash, Tool("stock", "echo", protocol.ToolAction)}
}
