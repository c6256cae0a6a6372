package wsgateway

import (
	"context"
	"errors"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// localCall records, in the audit log, the calls an application on
// device c made through the agent's own MCP endpoint (a LOCAL_CALL, ours,
// CBOR only), and acknowledges them as results are: the device keeps the
// report in its outbox until then. A report the store cannot take now is
// not acknowledged, so that the device sends it again after it next
// registers; one recorded before is acknowledged and not recorded twice.
func (g *Gateway) localCall(ctx context.Context, c *dispatch.Link, m *protocol.ClientMessage) {
	who, _ := m.Metadata["caller"].(string)
	log := g.log.With("device", c.ID, "caller", who, "local_call_id", m.PrevResponseID)
	err := g.store.Write(ctx, func(tx *store.Tx) error {
		for i, a := range m.Actions {
			first, err := tx.Commands().AppendLocalCall(c.ID, who, a, m.ActionResults[i])
			if err != nil {
				return err
			}
			if first {
				log.Info("local call recorded", "tool", a.ToolName, "status", m.ActionResults[i].Status, "error", m.ActionResults[i].Error)
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, store.ErrUnavailable):
		log.Warn("local call not recorded; the device reports it again", "err", err)
	case err != nil:
		log.Error("local call refused", "err", err)
		g.sendError(ctx, c.Conn, "local_call not recorded: "+err.Error(), m.RequestID)
	default:
		g.metrics.LocalCalls(len(m.Actions))
		g.sendAck(ctx, c.Conn, m)
	}
}
