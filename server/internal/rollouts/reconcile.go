package rollouts

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/rollout"
)

// retryAfter is how soon a worker tries again after the store failed it.
const retryAfter = 5 * time.Second

// view is what one reconciliation of a rollout reads.
type view struct {
	r store.Rollout
	// tools are the desired revision's (none after a first revision was
	// rolled back); spec is its, or the latest's when there is none.
	tools map[string]string
	spec  *rollout.Spec
	// revert is the agent version of the revision rolled back, when the
	// one rolled back to names none: each device that runs it takes it
	// back.
	revert string
	// selected are the devices its selector picks; rows their states,
	// and those of devices that left it.
	selected []string
	rows     map[string]store.RolloutDevice
	// read is how many of the worker's changes had ended when the rows
	// were read (worker.busy).
	read uint64
}

// reconcile brings w's rollout one step closer to its desired state, and
// says when it wants to run again (0: on the next event or sweep).
func (e *Engine) reconcile(ctx context.Context, w *worker) time.Duration {
	if !e.leads(ctx, w) {
		return 0
	}
	v, err := e.read(ctx, w)
	if err == nil && !e.stillLeads(w, v.r.LeaderNode, v.r.LeaderEpoch) {
		return 0
	}
	if err == nil {
		var wake time.Duration
		if wake, err = e.step(ctx, w, v); err == nil {
			return wake
		}
	}
	if errors.Is(err, store.ErrRolloutMoved) {
		return time.Millisecond // moved by a pause, a resume, a rollback: look again
	}
	if ctx.Err() == nil {
		e.log.Warn("rollout not reconciled; trying again", "rollout", w.name, "err", err, "in", retryAfter)
	}
	return retryAfter
}

// read reads w's rollout as reconcile sees it.
func (e *Engine) read(ctx context.Context, w *worker) (*view, error) {
	name := w.name
	read := w.endedCount()
	reads := e.cfg.Store.Rollouts()
	r, err := reads.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	v := &view{r: r, rows: map[string]store.RolloutDevice{}, read: read}
	var sel access.Selector
	if v.tools, v.spec, sel, err = e.desiredOf(ctx, r); err != nil {
		return nil, err
	}
	if v.revert, err = e.revertOf(ctx, v); err != nil {
		return nil, err
	}
	if v.selected, err = e.cfg.Matching(ctx, sel); err != nil {
		return nil, err
	}
	rows, err := reads.Devices(ctx, name)
	if err != nil {
		return nil, err
	}
	for _, d := range rows {
		v.rows[d.DeviceID] = d
	}
	return v, nil
}

// desiredOf is what r wants: the desired revision's tools (none after a
// first revision was rolled back), its spec (the latest's when there is
// no desired revision) and its selector.
func (e *Engine) desiredOf(ctx context.Context, r store.Rollout) (map[string]string, *rollout.Spec, access.Selector, error) {
	rev, err := e.cfg.Store.Rollouts().Revision(ctx, r.Name, cmp.Or(r.Revision, r.Latest))
	if err != nil {
		return nil, nil, nil, err
	}
	tools := map[string]string{}
	if r.Revision > 0 {
		tools = rev.Tools
	}
	spec, err := rollout.ParseDigests(rev.Spec)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("rollout %s revision %d: %w", r.Name, rev.Revision, err)
	}
	sel, err := access.ParseSelector(string(spec.Selector))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("rollout %s: selector: %w", r.Name, err)
	}
	return tools, spec, sel, nil
}

// revertOf is the agent version each device of v takes back: the latest
// revision's, when it was rolled back to one that names another version,
// or none.
func (e *Engine) revertOf(ctx context.Context, v *view) (string, error) {
	if !v.rollingBack() || v.r.Revision == v.r.Latest {
		return "", nil
	}
	rev, err := e.cfg.Store.Rollouts().Revision(ctx, v.r.Name, v.r.Latest)
	if err != nil {
		return "", err
	}
	latest, err := rollout.ParseDigests(rev.Spec)
	if err != nil {
		return "", fmt.Errorf("rollout %s revision %d: %w", v.r.Name, rev.Revision, err)
	}
	if v.r.Revision > 0 && latest.Agent == v.spec.Agent {
		return "", nil
	}
	return latest.Agent, nil
}

// step is one reconciliation: the rows follow the selection and the
// devices' reports, then changes start, then the waves and the rollout
// move on.
func (e *Engine) step(ctx context.Context, w *worker, v *view) (time.Duration, error) {
	if err := e.assign(ctx, v); err != nil {
		return 0, err
	}
	if err := e.observe(ctx, w, v); err != nil {
		return 0, err
	}
	if err := e.leave(ctx, w, v); err != nil {
		return 0, err
	}
	if v.r.State == api.RolloutPaused {
		return 0, nil
	}
	if reason := v.overBudget(); v.r.State == api.RolloutRolling && reason != "" {
		return 0, e.stop(ctx, v, reason)
	}
	if err := e.startChanges(ctx, w, v); err != nil {
		return 0, err
	}
	switch v.r.State {
	case api.RolloutApproval:
		return 0, nil
	case api.RolloutWaiting:
		return e.waitForWave(ctx, v)
	}
	return e.advance(ctx, w, v)
}

// assign gives each selected device without a row at the desired
// revision one: in its wave, by its place among the selected devices
// (online ones first, so that a canary is one that can change now); in
// wave 0 while rolling back. A device already at the revision is done.
func (e *Engine) assign(ctx context.Context, v *view) error {
	var fresh []string
	at := 0
	for _, id := range v.selected {
		if row, ok := v.rows[id]; ok && row.Revision == v.r.Revision && row.State != api.DeviceRemoving {
			at++
		} else {
			fresh = append(fresh, id)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	online := map[string]bool{}
	for _, id := range fresh {
		online[id] = e.cfg.Online(id)
	}
	slices.SortStableFunc(fresh, func(a, b string) int {
		if online[a] != online[b] {
			if online[a] {
				return -1
			}
			return 1
		}
		return cmp.Compare(a, b)
	})
	sizes := v.spec.WaveSizes(len(v.selected))
	var rows []store.RolloutDevice
	for i, id := range fresh {
		row := v.rows[id]
		row.Name, row.DeviceID, row.Revision, row.State, row.Error, row.SessionID = v.r.Name, id, v.r.Revision, api.DevicePending, "", ""
		row.Wave = waveOf(at+i, sizes)
		if v.rollingBack() {
			row.Wave = 0
		}
		// A device that reports the revision's tools is done, unless its
		// agent may have to change: the change then finds out.
		if d := v.desired(); row.Applied == v.r.Revision && d.agent == "" && d.revert == "" {
			row.State = api.DeviceDone
		}
		v.rows[id] = row
		rows = append(rows, row)
	}
	return e.put(ctx, rows...)
}

// waveOf is the wave of the device at place i, from 0: the first whose
// cumulative size passes it, else the last.
func waveOf(i int, sizes []int) int {
	for k, n := range sizes {
		if i < n {
			return k
		}
	}
	return len(sizes) - 1
}

// observe takes what the devices in open waves report: the revision each
// runs, which a restore, a crash mid-apply or a rollback may have made
// other than the row says, and tools deployed by hand over the
// rollout's (drift). A report changes only when its device registers:
// it reads those registered since it last looked, and every device's at
// start and at each sweep.
func (e *Engine) observe(ctx context.Context, w *worker, v *view) error {
	var changed []store.RolloutDevice
	all, registered := w.toRead()
	for id, row := range v.rows {
		if !all && !registered[id] {
			continue
		}
		if w.busy(id, v.read) {
			w.reread(id) // what it registered is read once its change ends
			continue
		}
		if row.Wave > v.r.Wave || !e.cfg.Online(id) {
			continue
		}
		info := e.cfg.Inventory(ctx, id)
		if info == nil {
			continue
		}
		reports, _ := protocol.RolloutsFromMetadata(info.CustomMetadata)
		rep := reports[v.r.Name]
		next := row
		next.Applied = rep.Revision
		switch {
		case row.State == api.DeviceDone && v.drifted(row, rep, info.AgentVersion):
			next.State = api.DevicePending
		case row.State == api.DeviceDone && len(rep.Overrides) > 0:
			next.State = api.DeviceDrift
		case row.State == api.DeviceDrift && len(rep.Overrides) == 0:
			next.State = api.DeviceDone
		}
		if next != row {
			v.rows[id] = next
			changed = append(changed, next)
		}
	}
	return e.put(ctx, changed...)
}

// drifted reports whether a device done with the rollout's revision no
// longer runs it: it reports another revision of the rollout's tools, or
// another agent than the revision's. A rollout of an agent alone applies
// no tools, and its revision is the agent's.
func (v *view) drifted(row store.RolloutDevice, rep protocol.RolloutReport, agentVersion string) bool {
	d := v.desired()
	if d.agent != "" && agentVersion != d.agent {
		return true
	}
	return len(d.tools) > 0 && rep.Revision != row.Revision
}

// report is what device id reports of rollout name, if it reports at
// all: a device that never registered says nothing.
func (e *Engine) report(ctx context.Context, id, name string) (protocol.RolloutReport, bool) {
	info := e.cfg.Inventory(ctx, id)
	if info == nil {
		return protocol.RolloutReport{}, false
	}
	reports, _ := protocol.RolloutsFromMetadata(info.CustomMetadata)
	return reports[name], true
}

// leave removes the rollout's tools from the devices that left its
// selector (or were revoked), then forgets them.
func (e *Engine) leave(ctx context.Context, w *worker, v *view) error {
	selected := map[string]bool{}
	for _, id := range v.selected {
		selected[id] = true
	}
	for id, row := range v.rows {
		if selected[id] || w.busy(id, v.read) {
			continue
		}
		_, err := e.cfg.Store.Devices().Get(ctx, id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		online := e.cfg.Online(id)
		if err != nil || e.hasNothing(ctx, row, online) { // no device (revoked), or nothing of the rollout on it
			if err := e.forget(ctx, v.r.Name, id); err != nil {
				return err
			}
			delete(v.rows, id)
			continue
		}
		// A removal that failed is tried again once device_timeout has
		// passed since, not at every reconciliation.
		retry := row.State != api.DeviceRemoving || time.Since(row.UpdatedAt) > time.Duration(v.spec.DeviceTimeout)
		if v.r.State != api.RolloutPaused && online && retry {
			e.start(w, v, id, func(ctx context.Context) { e.remove(ctx, v, row) })
		}
	}
	return nil
}

// hasNothing reports whether the device of row, which left the
// selector, has nothing of the rollout: it never applied a revision of
// it, as far as the row says and, linked, as it reports. A device
// offline whose change may have landed unheard (waiting, changing) is
// kept until it links and says.
func (e *Engine) hasNothing(ctx context.Context, row store.RolloutDevice, online bool) bool {
	if row.Applied != 0 {
		return false
	}
	if !online {
		return row.State == api.DevicePending || row.State == api.DeviceDone
	}
	rep, ok := e.report(ctx, row.DeviceID, row.Name)
	return ok && rep.Revision == 0
}

// overBudget says why the rollout must stop, if its failures are past
// max_failures.
func (v *view) overBudget() string {
	failed, finished := 0, 0
	var last store.RolloutDevice
	for _, id := range v.selected {
		row, ok := v.rows[id]
		if !ok || row.Revision != v.r.Revision {
			continue
		}
		switch row.State {
		case api.DeviceFailed:
			failed++
			finished++
			if row.UpdatedAt.After(last.UpdatedAt) || last.DeviceID == "" {
				last = row
			}
		case api.DeviceDone, api.DeviceDrift:
			finished++
		}
	}
	if !v.spec.MaxFailures.Exceeded(failed, finished, v.spec.MinDevices) {
		return ""
	}
	return fmt.Sprintf("%d of %d devices failed, past max_failures %s; last: %s: %s", failed, finished, v.spec.MaxFailures, last.DeviceID, last.Error)
}

// rollingBack reports whether the rollout is going back, or has gone
// back, to an earlier revision: every device changes at once then.
func (v *view) rollingBack() bool {
	return v.r.State == api.RolloutRollingBack || v.r.State == api.RolloutRolledBack
}

// startChanges starts a change of each device in an open wave that is
// not at the revision: at once if it is online, else once it links.
func (e *Engine) startChanges(ctx context.Context, w *worker, v *view) error {
	var waiting []store.RolloutDevice
	for id, row := range v.rows {
		if row.Revision != v.r.Revision || row.Wave > v.r.Wave || w.busy(id, v.read) {
			continue
		}
		if row.State != api.DevicePending && row.State != api.DeviceWaiting && row.State != api.DeviceChanging {
			continue
		}
		if !e.cfg.Online(id) {
			if row.State != api.DeviceWaiting {
				row.State, row.UpdatedAt = api.DeviceWaiting, time.Now()
				v.rows[id] = row
				waiting = append(waiting, row)
			}
			continue
		}
		e.start(w, v, id, func(ctx context.Context) { e.change(ctx, v, row) })
	}
	return e.put(ctx, waiting...)
}

// advance moves the rollout on once its open waves are through: the
// next wave opens (after between_waves, or on approval), or the rollout
// is done, or rolled back.
func (e *Engine) advance(ctx context.Context, w *worker, v *view) (time.Duration, error) {
	if through, wake := v.wavesThrough(w); !through {
		return wake, nil
	}
	r, from := v.r, v.r
	last := len(v.spec.Waves) - 1
	switch {
	case r.State == api.RolloutRollingBack:
		r.State = api.RolloutRolledBack
	case r.State != api.RolloutRolling:
		return 0, nil
	case r.Wave >= last:
		r.State = api.RolloutDone
	default:
		wait, approve := v.spec.Wait()
		switch {
		case approve:
			r.State = api.RolloutApproval
		case wait > 0:
			r.State = api.RolloutWaiting
		default:
			r.Wave++
		}
	}
	r.StateSince = time.Now()
	if err := e.setRollout(ctx, r, from); err != nil {
		return 0, err
	}
	e.log.Info("rollout moved on", "rollout", r.Name, "revision", r.Revision, "state", r.State, "wave", r.Wave)
	e.Kick(r.Name)
	return 0, nil
}

// wavesThrough reports whether every device of the open waves is through
// (done, failed or drifted), or offline for longer than device_timeout,
// and the last wave open has had at least one device through or has
// none: a wave whose devices are all offline waits for them, and a device
// briefly offline (a restart of the server, or of the device) holds its
// wave until it links, or until device_timeout has passed, which wake
// says. Rolling back, offline devices hold nothing: they go back when
// they link.
func (v *view) wavesThrough(w *worker) (through bool, wake time.Duration) {
	inWave, done := 0, 0
	grace := time.Duration(v.spec.DeviceTimeout)
	for id, row := range v.rows {
		if row.Revision != v.r.Revision || row.Wave > v.r.Wave {
			continue
		}
		switch {
		case w.busy(id, v.read) || row.State == api.DevicePending || row.State == api.DeviceChanging:
			return false, 0
		case row.State == api.DeviceWaiting && !v.rollingBack():
			if left := time.Until(row.UpdatedAt.Add(grace)); left > 0 {
				return false, left
			}
		case row.Wave == v.r.Wave && row.State != api.DeviceWaiting:
			done++
		}
		if row.Wave == v.r.Wave {
			inWave++
		}
	}
	return inWave == 0 || done > 0 || v.rollingBack(), 0
}

// waitForWave opens the next wave once between_waves has passed since
// the last one was through.
func (e *Engine) waitForWave(ctx context.Context, v *view) (time.Duration, error) {
	wait, _ := v.spec.Wait()
	if left := time.Until(v.r.StateSince.Add(wait)); left > 0 {
		return left, nil
	}
	return 0, e.openNext(ctx, v.r)
}

// openNext opens the wave after r's last open one.
func (e *Engine) openNext(ctx context.Context, r store.Rollout) error {
	from := r
	r.Wave++
	r.State, r.StateSince, r.Reason = api.RolloutRolling, time.Now(), ""
	if err := e.setRollout(ctx, r, from); err != nil {
		return err
	}
	e.log.Info("rollout wave opened", "rollout", r.Name, "revision", r.Revision, "wave", r.Wave)
	e.Kick(r.Name)
	return nil
}

// stop stops the rollout past its failure budget: on_failure says
// whether it pauses or rolls back.
func (e *Engine) stop(ctx context.Context, v *view, reason string) error {
	e.log.Warn("rollout stopped", "rollout", v.r.Name, "revision", v.r.Revision, "on_failure", v.spec.OnFailure, "reason", reason)
	if v.spec.OnFailure == rollout.OnFailureRollback {
		err := e.rollBack(ctx, v.r, reason, nil)
		var conflict *ConflictError
		if !errors.As(err, &conflict) {
			return err
		}
		reason += "; not rolled back: " + conflict.Reason
	}
	r := v.r
	r.State, r.StateSince, r.Reason = api.RolloutPaused, time.Now(), reason
	return e.setRollout(ctx, r, v.r)
}

// rollBack makes the revision before r's desired one desired again (or
// none, for a first revision), and every device goes back to it; audit,
// if not nil, is recorded with it.
func (e *Engine) rollBack(ctx context.Context, r store.Rollout, reason string, audit *store.AuditEntry) error {
	history, err := e.cfg.Store.Rollouts().Revisions(ctx, r.Name)
	if err != nil {
		return err
	}
	prev := 0
	for _, h := range history {
		if h.Revision < r.Revision && h.Outcome == outcomeSuperseded {
			prev = h.Revision
			break
		}
	}
	if err := e.backConflicts(ctx, r.Name, history, prev); err != nil {
		return err
	}
	from, was := r.Revision, r
	r.Revision, r.Wave, r.State, r.StateSince, r.Reason = prev, 0, api.RolloutRollingBack, time.Now(), reason
	err = e.cfg.Store.Write(ctx, func(tx *store.Tx) error {
		if err := tx.Rollouts().EndRevision(r.Name, from, "rolled back: "+reason); err != nil {
			return err
		}
		if prev > 0 {
			if err := tx.Rollouts().EndRevision(r.Name, prev, ""); err != nil {
				return err
			}
		}
		if audit != nil {
			if err := tx.Audit().Append(*audit); err != nil {
				return err
			}
		}
		return tx.Rollouts().SetRollout(r, was)
	})
	if err == nil {
		e.log.Warn("rollout rolling back", "rollout", r.Name, "from", from, "to", prev, "reason", reason)
		e.Kick(r.Name)
	}
	return err
}

// backConflicts refuses to take rollout name back to revision prev of
// its history if another rollout has since been let put a tool of the
// same name on a device prev's selector picks.
func (e *Engine) backConflicts(ctx context.Context, name string, history []store.RolloutRevision, prev int) error {
	for _, h := range history {
		if h.Revision != prev {
			continue
		}
		spec, err := rollout.ParseDigests(h.Spec)
		if err != nil {
			return err
		}
		sel, err := access.ParseSelector(string(spec.Selector))
		if err != nil {
			return err
		}
		devices, err := e.cfg.Matching(ctx, sel)
		if err != nil {
			return err
		}
		return e.conflicts(ctx, name, claims{h.Tools, spec.Agent}, devices)
	}
	return nil
}

// outcomeSuperseded is the outcome of a revision a newer one replaced.
const outcomeSuperseded = "superseded"

// put records rows.
func (e *Engine) put(ctx context.Context, rows ...store.RolloutDevice) error {
	if len(rows) == 0 {
		return nil
	}
	return e.cfg.Store.WriteUnsynced(ctx, func(tx *store.Tx) error {
		for _, row := range rows {
			if err := tx.Rollouts().PutDevice(row); err != nil {
				return err
			}
		}
		return nil
	})
}

// forget forgets device id in rollout name.
func (e *Engine) forget(ctx context.Context, name, id string) error {
	return e.cfg.Store.WriteUnsynced(ctx, func(tx *store.Tx) error { return tx.Rollouts().DeleteDevice(name, id) })
}

// setRollout records where r is, if it is still where from says.
func (e *Engine) setRollout(ctx context.Context, r, from store.Rollout) error {
	return e.cfg.Store.Write(ctx, func(tx *store.Tx) error { return tx.Rollouts().SetRollout(r, from) })
}

// specJSON is s as the store keeps it.
func specJSON(s *rollout.Spec) json.RawMessage {
	b, _ := json.Marshal(s) // strings, numbers and plan steps of JSON values
	return b
}
