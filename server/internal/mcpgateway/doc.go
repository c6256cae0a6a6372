// Package mcpgateway serves /mcp, the MCP gateway: any MCP client drives
// the fleet's tools through it, held to its operator identity's role and
// scope, every call a command or task like any other (admitted by the
// front door, recorded, audited). Each identity gets an MCP server of its
// own (mcp-go's, over Streamable HTTP) serving the gateway's tools and,
// for a small scope, each device's tools directly. See
// RATIONALE.md.
package mcpgateway
