package agent

import (
	"context"

	"github.com/edgeaip/edgeaip/protocol"
)

// tool is anything a Computer can call: a wasm module or a meta tool.
type tool interface {
	info() protocol.MCPToolInfo
	call(ctx context.Context, params map[string]any) protocol.Result
}

func failure(err error) protocol.Result {
	return protocol.Result{Status: protocol.ResultFailure, Error: err.Error()}
}
