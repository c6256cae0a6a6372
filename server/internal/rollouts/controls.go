package rollouts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
)

// Pause stops rollout name from starting changes: those running finish.
func (e *Engine) Pause(ctx context.Context, who *identity.Caller, name string) (api.Rollout, error) {
	return e.control(ctx, who, name, api.ActionRolloutPause, func(r store.Rollout) (store.Rollout, error) {
		if r.State == api.RolloutPaused {
			return r, &ConflictError{fmt.Sprintf("rollout %q is paused already: %s", name, r.Reason)}
		}
		r.State, r.Reason = api.RolloutPaused, "paused by "+who.Name
		return r, nil
	})
}

// Resume goes on with rollout name: a paused one retries its failed
// devices and carries on (going back, if it was rolled back); one
// waiting for approval opens its next wave.
func (e *Engine) Resume(ctx context.Context, who *identity.Caller, name string) (api.Rollout, error) {
	return e.control(ctx, who, name, api.ActionRolloutResume, func(r store.Rollout) (store.Rollout, error) {
		switch r.State {
		case api.RolloutApproval:
			r.Wave++
		case api.RolloutPaused:
			if err := e.retryFailed(ctx, r); err != nil {
				return r, err
			}
		default:
			return r, &ConflictError{fmt.Sprintf("rollout %q is %s: only a paused rollout, or one waiting for approval, resumes", name, r.State)}
		}
		r.State, r.Reason = api.RolloutRolling, ""
		if r.Revision < r.Latest {
			// Only a rollback makes an older revision desired: it goes on
			// going back, every device at once.
			r.State = api.RolloutRollingBack
		}
		return r, nil
	})
}

// Rollback takes rollout name back to the revision before its desired
// one (none, for a first revision): every device changed goes back.
func (e *Engine) Rollback(ctx context.Context, who *identity.Caller, name string) (api.Rollout, error) {
	err := e.whileMoving(ctx, name, func(r store.Rollout) error {
		if r.Revision == 0 {
			return &ConflictError{fmt.Sprintf("rollout %q has no revision to roll back: revision %d was rolled back already", name, r.Latest)}
		}
		if r.State == api.RolloutRollingBack || r.State == api.RolloutRolledBack {
			return &ConflictError{fmt.Sprintf("rollout %q was rolled back to revision %d already (from %d): to go further back, apply the revision wanted", name, r.Revision, r.Latest)}
		}
		audit := who.Audit(api.ActionRolloutRollback, "", map[string]any{"rollout": name, "revision": r.Revision})
		return e.rollBack(ctx, r, "rolled back by "+who.Name, &audit)
	})
	if err != nil {
		return api.Rollout{}, err
	}
	e.announce(name)
	return e.Status(ctx, who, name)
}

// control changes rollout name's state as change says, audited as
// action by who, and reconciles it at once.
func (e *Engine) control(ctx context.Context, who *identity.Caller, name, action string, change func(store.Rollout) (store.Rollout, error)) (api.Rollout, error) {
	err := e.whileMoving(ctx, name, func(r store.Rollout) error {
		from := r
		r, err := change(r)
		if err != nil {
			return err
		}
		r.StateSince = time.Now()
		err = e.cfg.Store.Write(ctx, func(tx *store.Tx) error {
			if err := tx.Rollouts().SetRollout(r, from); err != nil {
				return err
			}
			return tx.Audit().Append(who.Audit(action, "", map[string]any{"rollout": name, "revision": r.Revision, "state": r.State}))
		})
		if err == nil {
			e.log.Info("rollout "+r.State, "rollout", name, "by", who.Name)
			e.Kick(name)
		}
		return err
	})
	if err != nil {
		return api.Rollout{}, err
	}
	e.announce(name)
	return e.Status(ctx, who, name)
}

// whileMoving runs fn on rollout name as it is now, again if the rollout
// moved on meanwhile (a wave through, say), a few times.
func (e *Engine) whileMoving(ctx context.Context, name string, fn func(store.Rollout) error) error {
	for range 3 {
		r, err := e.get(ctx, name)
		if err != nil {
			return err
		}
		if err = fn(r); !errors.Is(err, store.ErrRolloutMoved) {
			return err
		}
	}
	return &ConflictError{fmt.Sprintf("rollout %q kept moving on while this was asked: look again, and ask again", name)}
}

// retryFailed makes r's failed devices pending again.
func (e *Engine) retryFailed(ctx context.Context, r store.Rollout) error {
	rows, err := e.cfg.Store.Rollouts().Devices(ctx, r.Name)
	if err != nil {
		return err
	}
	var retry []store.RolloutDevice
	for _, row := range rows {
		if row.State == api.DeviceFailed && row.Revision == r.Revision {
			row.State = api.DevicePending
			retry = append(retry, row)
		}
	}
	return e.put(ctx, retry...)
}

// get is rollout name, or ErrNotFound.
func (e *Engine) get(ctx context.Context, name string) (store.Rollout, error) {
	r, err := e.cfg.Store.Rollouts().Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return r, fmt.Errorf("rollout %q: %w", name, ErrNotFound)
	}
	return r, err
}
