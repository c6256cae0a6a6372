package rollouts

import (
	"context"
	"slices"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// Status is rollout name as who may see it: where it is, its waves, and
// each selected device in who's scope.
func (e *Engine) Status(ctx context.Context, who *identity.Caller, name string) (api.Rollout, error) {
	r, err := e.get(ctx, name)
	if err != nil {
		return api.Rollout{}, err
	}
	return e.statusOf(ctx, who, r, true)
}

// List is every rollout, without its devices.
func (e *Engine) List(ctx context.Context, who *identity.Caller) ([]api.Rollout, error) {
	all, err := e.cfg.Store.Rollouts().List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Rollout, 0, len(all))
	for _, r := range all {
		s, err := e.statusOf(ctx, who, r, false)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// History is rollout name's revisions, newest first.
func (e *Engine) History(ctx context.Context, name string) ([]api.RolloutRevision, error) {
	if _, err := e.get(ctx, name); err != nil {
		return nil, err
	}
	revs, err := e.cfg.Store.Rollouts().Revisions(ctx, name)
	if err != nil {
		return nil, err
	}
	out := make([]api.RolloutRevision, len(revs))
	for i, r := range revs {
		out[i] = api.RolloutRevision{Revision: r.Revision, Tools: r.Tools, Outcome: r.Outcome, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, Spec: r.Spec}
	}
	return out, nil
}

// statusOf is r's status for who; withDevices lists each device.
func (e *Engine) statusOf(ctx context.Context, who *identity.Caller, r store.Rollout, withDevices bool) (api.Rollout, error) {
	tools, spec, sel, err := e.desiredOf(ctx, r)
	if err != nil {
		return api.Rollout{}, err
	}
	rows, err := e.cfg.Store.Rollouts().Devices(ctx, r.Name)
	if err != nil {
		return api.Rollout{}, err
	}
	if rows, err = e.inScope(ctx, who, rows); err != nil {
		return api.Rollout{}, err
	}
	out := api.Rollout{Name: r.Name, Revision: r.Revision, Latest: r.Latest, State: r.State, Reason: r.Reason,
		Selector: sel.String(), Tools: tools, Wave: r.Wave, Counts: map[string]int{}, UpdatedAt: r.UpdatedAt}
	if r.Revision > 0 {
		out.Agent = spec.Agent
	}
	v := view{r: r}
	for i, w := range spec.Waves {
		out.Waves = append(out.Waves, api.RolloutWave{Size: w.String(), Open: i <= r.Wave || v.rollingBack(), Counts: map[string]int{}})
	}
	for _, row := range rows {
		out.Counts[row.State]++
		if row.Wave < len(out.Waves) {
			out.Waves[row.Wave].Devices++
			out.Waves[row.Wave].Counts[row.State]++
		}
		if withDevices {
			out.Devices = append(out.Devices, e.deviceStatus(ctx, r.Name, row))
		}
	}
	return out, nil
}

// deviceStatus is row as the API shows it, with the tools deployed by
// hand over the rollout's.
func (e *Engine) deviceStatus(ctx context.Context, name string, row store.RolloutDevice) api.RolloutDevice {
	d := api.RolloutDevice{DeviceID: row.DeviceID, Wave: row.Wave, State: row.State, Revision: row.Revision, Applied: row.Applied,
		Online: e.cfg.Online(row.DeviceID), TaskID: row.SessionID, Error: row.Error, UpdatedAt: row.UpdatedAt}
	if rep, ok := e.report(ctx, row.DeviceID, name); ok && len(rep.Overrides) > 0 {
		d.Drift = rep.Overrides
	}
	return d
}

// inScope are the rows of devices in who's scope.
func (e *Engine) inScope(ctx context.Context, who *identity.Caller, rows []store.RolloutDevice) ([]store.RolloutDevice, error) {
	if len(who.Scope.Devices) == 0 {
		return rows, nil
	}
	ids, err := e.cfg.Matching(ctx, who.Scope.Devices)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(rows, func(row store.RolloutDevice) bool {
		_, found := slices.BinarySearch(ids, row.DeviceID)
		return !found
	}), nil
}
