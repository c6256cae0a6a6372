package agent

import (
	"context"

	"github.com/edgeaip/edgeaip/protocol"
)

// tool is anything a Computer can call: a wasm module, a tool of a proxied
// MCP server, or a meta tool. Each enforces its own timeout.
type tool interface {
	info() protocol.MCPToolInfo
	call(ctx context.Context, params map[string]any) protocol.Result
}

func failure(err error) protocol.Result {
	return protocol.Result{Status: protocol.ResultFailure, Error: err.Error()}
}
