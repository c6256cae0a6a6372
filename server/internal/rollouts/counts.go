package rollouts

import (
	"context"

	"github.com/edgeaip/edgeaip/server/api"
)

// Counts are every rollout's state and desired revision, with its
// devices by state (Counts only: no waves, no devices), across the whole
// fleet: two reads whatever the number of devices, for the metrics to
// take at each scrape.
func (e *Engine) Counts(ctx context.Context) ([]api.Rollout, error) {
	all, err := e.cfg.Store.Rollouts().List(ctx)
	if err != nil {
		return nil, err
	}
	counts, err := e.cfg.Store.Rollouts().StateCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Rollout, len(all))
	at := make(map[string]int, len(all))
	for i, r := range all {
		out[i] = api.Rollout{Name: r.Name, Revision: r.Revision, Latest: r.Latest, State: r.State, Reason: r.Reason,
			Counts: map[string]int{}, UpdatedAt: r.UpdatedAt}
		at[r.Name] = i
	}
	for _, c := range counts {
		// A rollout applied between the two reads has no row in the first.
		if i, ok := at[c.Name]; ok {
			out[i].Counts[c.State] = c.Devices
		}
	}
	return out, nil
}
