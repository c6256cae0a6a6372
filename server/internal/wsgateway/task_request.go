package wsgateway

import (
	"context"
	"errors"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/plan"
	"github.com/google/uuid"
)

// A constellation's TASK as UFO's server takes it: the task name it sends
// over the WebSocket is sanitized, not refused, and a TASK that cannot
// start is answered with a TASK_END that its client can match.

// wsTaskName is the name a TASK's session runs under, and the name the
// client sent if that had to be sanitized. UFO's server sanitizes a name
// that comes over the WebSocket (its galaxy client names its tasks
// galaxy/<task>/<name>), with a warning, where its HTTP API, like POST
// /api/dispatch here, refuses it. The sanitized name is the one
// task_result looks up; the original is kept on the task.
func (g *Gateway) wsTaskName(c *constellation, asked string) (name, original string) {
	if asked == "" || plan.ValidTaskName(asked) {
		return asked, ""
	}
	name = plan.SanitizeTaskName(asked)
	if name == "" {
		name = uuid.NewString()
	}
	g.log.Warn("task name sanitized", "client_id", c.ID, "task_name", name, "sent", asked)
	return name, asked
}

// refuseTask answers a TASK that cannot start with a TASK_END, status
// failed, carrying its session_id and why: UFO's clients wait for the
// TASK_END of their session_id, and an ERROR, which names no session,
// would leave them waiting for their whole timeout. (UFO's galaxy client
// only logs an ERROR; its device client too.) A TASK for a session that
// is already running gets an ERROR alone, since that session's TASK_END
// will still come.
func (g *Gateway) refuseTask(ctx context.Context, c *constellation, m *protocol.ClientMessage, err error) {
	reason := "task: " + err.Error()
	var running *tasks.SessionRunningError
	if errors.As(err, &running) {
		g.sendError(ctx, c.Conn, reason, m.RequestID)
		return
	}
	sessionID := m.SessionID
	if sessionID == "" {
		sessionID = uuid.NewString()
	}
	g.log.Info("task refused", "client_id", c.ID, "session_id", sessionID, "err", err)
	g.send(c.Conn, &protocol.ServerMessage{
		Type: protocol.ServerTaskEnd, Status: protocol.StatusFailed, SessionID: sessionID,
		Error: reason, Timestamp: protocol.Now(), ResponseID: uuid.NewString(),
	})
}
