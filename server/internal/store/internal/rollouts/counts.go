package rollouts

import (
	"context"
	"fmt"

	"github.com/edgeaip/edgeaip/server/internal/store/internal/sqlrow"
)

// StateCount is how many devices of a rollout are in one state.
type StateCount struct {
	Name, State string
	Devices     int
}

// StateCounts are every rollout's devices by state, in one query whose
// rows are rollouts times states, whatever the number of devices.
func (q Reads) StateCounts(ctx context.Context) ([]StateCount, error) {
	rows, err := q.r.ReadRows(ctx, `SELECT name, state, COUNT(*) FROM rollout_devices GROUP BY name, state ORDER BY name, state`)
	if err != nil {
		return nil, fmt.Errorf("store: rollout device counts: %w", err)
	}
	out, err := sqlrow.Collect(rows, func(row sqlrow.Row) (StateCount, error) {
		var c StateCount
		return c, row.Scan(&c.Name, &c.State, &c.Devices)
	}, []StateCount{})
	if err != nil {
		return nil, fmt.Errorf("store: rollout device counts: %w", err)
	}
	return out, nil
}
