package store

import (
	"fmt"

	"github.com/edgeaip/edgeaip/protocol"

	"github.com/edgeaip/edgeaip/server/internal/encodedonce"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/audit"
	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// actorLocal is the actor of a local call's entry; see AppendLocalCall.
const actorLocal = "local"

// AppendLocalCall records a call an application on device deviceID made
// through the agent's own MCP endpoint: who (as the application named
// itself), the action, and its result. A device reports a call until the
// server acknowledges it, so a call already recorded, by its call_id, is
// recorded once; the answer says whether this was the first time.
func (w CommandWrites) AppendLocalCall(deviceID, who string, a protocol.Command, r protocol.Result) (bool, error) {
	params, err := encodedonce.JSON(audit.Parameters(a.Parameters))
	if err != nil {
		return false, fmt.Errorf("store: local call %s: parameters: %w", a.CallID, err)
	}
	tool := a.ToolName
	if a.ToolType != "" {
		tool = protocol.ToolKey(a.ToolType, a.ToolName)
	}
	res, err := w.t.exec(
		`INSERT INTO audit (at, actor, identity, token_id, action, device_id, session_id, response_id, call_id, tool, namespace, module_sha256, parameters, outcome, error, late)
		 VALUES (?, ?, ?, '', '', ?, '', '', ?, ?, ?, '', ?, ?, ?, 0) ON CONFLICT DO NOTHING`,
		sqlrow.Now(), actorLocal, who, deviceID, a.CallID, tool, r.Namespace, string(params), string(r.Status), r.Error)
	if err != nil {
		return false, fmt.Errorf("store: local call %s: %w", a.CallID, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
