package server

import "github.com/edgeaip/edgeaip/server/internal/mcpgateway"

// MCPConfig tunes the MCP gateway at /mcp: direct tools, an identity's
// call limits, the size of results, idle sessions (mcpgateway.Options).
// The zero value gives the defaults.
type MCPConfig = mcpgateway.Options
