package computer_test

import (
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/agent/internal/computer"
	"github.com/edgeaip/edgeaip/agent/internal/mcpproxy"
	"github.com/edgeaip/edgeaip/agent/internal/mcpproxy/mcptest"
	"github.com/edgeaip/edgeaip/agent/internal/reply"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
)

func TestAnMCPResultLargerThanAFrameFailsNamingTheTool(t *testing.T) {
	pool := mcpproxy.NewPool(reply.Cap{Enc: protocol.CBOR, Max: 1024}, "test", quietLog, func() {})
	t.Cleanup(pool.Close)
	r := computer.NewRouter(computer.NewManager(defaultAction(mcptest.Stdio(t, "helper")), nil, pool, quietLog), quietLog)

	res := one(t, r, computer.Target{}, action("say", map[string]any{"text": strings.Repeat("x", 2000)}))
	assert.Equal(t, protocol.ResultFailure, res.Status)
	assert.Regexp(t, `^tool "say" of MCP server "helper": result of 20\d\d bytes exceeds the link's frame cap of 1024 bytes$`, res.Error)
	assert.Equal(t, "call-say", res.CallID)
	res = one(t, r, computer.Target{}, action("say", map[string]any{"text": "short"}))
	assert.Equal(t, "short", res.Result)
}
