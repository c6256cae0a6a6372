package rollouts

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/internal/tasks"
	"github.com/edgeaip/edgeaip/server/plan"
)

// change brings the device of row to v's desired revision: it stages the
// modules the device does not report, applies the revision, and runs
// the health checks, within the rollout's device_timeout. The device's
// row says how it went: done; failed, with the device's own reason; or
// waiting, if the device went offline meanwhile (it changes when it
// links again: stage and apply are idempotent on the device).
func (e *Engine) change(ctx context.Context, v *view, row store.RolloutDevice) {
	row.State, row.Error = api.DeviceChanging, ""
	if e.put(ctx, row) != nil {
		return // the next reconciliation starts it again
	}
	timeout := time.Duration(v.spec.DeviceTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := deviceChange{e: e, ctx: ctx, rollout: v.r.Name, device: row.DeviceID, timeout: timeout}
	// No revision is desired after a first one was rolled back: the
	// device applies none of the latest's tools.
	applied, err := c.run(cmp.Or(v.r.Revision, v.r.Latest), v.desired(), v.healthPlan())
	if applied {
		row.Applied = v.r.Revision
	}
	row.SessionID = c.lastTask
	e.ended(ctx, row, err)
}

// remove takes v's tools off the device of row, which left the
// selector, then forgets it.
func (e *Engine) remove(ctx context.Context, v *view, row store.RolloutDevice) {
	row.State, row.Error = api.DeviceRemoving, ""
	if e.put(ctx, row) != nil {
		return
	}
	timeout := time.Duration(v.spec.DeviceTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := deviceChange{e: e, ctx: ctx, rollout: v.r.Name, device: row.DeviceID, timeout: timeout}
	if _, err := c.run(max(row.Applied, v.r.Latest), desired{}, nil); err != nil {
		if e.ctx.Err() != nil {
			return // the server stops: the removal starts again after its restart
		}
		row.SessionID, row.Error = c.lastTask, err.Error()
		if err := e.put(context.WithoutCancel(ctx), row); err != nil {
			e.log.Warn("rollout device state not recorded", "rollout", row.Name, "device", row.DeviceID, "err", err)
		}
		e.log.Warn("rollout's tools not removed from a device that left it; trying again after device_timeout", "rollout", v.r.Name, "device", row.DeviceID, "err", err)
		return
	}
	if err := e.forget(context.WithoutCancel(ctx), v.r.Name, row.DeviceID); err != nil {
		e.log.Warn("rollout device not forgotten", "rollout", v.r.Name, "device", row.DeviceID, "err", err)
	}
	e.log.Info("rollout's tools removed from a device that left it", "rollout", v.r.Name, "device", row.DeviceID)
}

// ended records how a change of row's device ended.
func (e *Engine) ended(ctx context.Context, row store.RolloutDevice, err error) {
	var skip skipped
	switch {
	case err == nil:
		row.State = api.DeviceDone
	case errors.As(err, &skip):
		row.State, row.Error = api.DeviceSkipped, skip.reason
	case e.leadLost(ctx):
		return // the change starts again after the restart, or on the new leader
	case !e.cfg.Online(row.DeviceID):
		row.State, row.Error = api.DeviceWaiting, err.Error()
	default:
		row.State, row.Error = api.DeviceFailed, err.Error()
	}
	if err := e.put(context.WithoutCancel(ctx), row); err != nil {
		e.log.Warn("rollout device state not recorded", "rollout", row.Name, "device", row.DeviceID, "err", err)
	}
	log := e.log.With("rollout", row.Name, "device", row.DeviceID, "revision", row.Revision, "state", row.State)
	if row.State == api.DeviceFailed || row.State == api.DeviceSkipped {
		log.Warn("rollout device "+row.State, "err", row.Error)
	} else {
		log.Info("rollout device changed")
	}
}

// desired is what a device is brought to: a revision's tools and agent.
type desired struct {
	tools map[string]string
	// agent is the agent's version (empty: left alone), and trial its
	// bound; revert, rolling back, the version to take back first.
	agent, revert string
	trial         time.Duration
}

// desired is what the desired revision wants of each device: its tools
// and agent. After a first revision was rolled back there is none.
func (v *view) desired() desired {
	d := desired{tools: v.tools, revert: v.revert}
	if v.r.Revision > 0 {
		d.agent, d.trial = v.spec.Agent, time.Duration(v.spec.AgentTrial)
	}
	return d
}

// healthPlan is the desired revision's health checks, or nil.
func (v *view) healthPlan() *plan.Plan {
	if d := v.desired(); len(d.tools) == 0 && d.agent == "" {
		return nil
	}
	p, _ := v.spec.HealthPlan() // checked when the revision was applied
	return p
}

// deviceChange runs one device's change as tasks, for its rollout.
type deviceChange struct {
	e               *Engine
	ctx             context.Context
	rollout, device string
	timeout         time.Duration
	// lastTask is the last task it started.
	lastTask string
}

// run stages what the device lacks of d's tools, brings the device's
// agent to d's (on trial), applies revision rev with the tools (none: the
// rollout's tools are removed), then runs health, which commits or
// rejects a new agent. applied says whether the device took the
// revision, health aside.
func (c *deviceChange) run(rev int, d desired, health *plan.Plan) (applied bool, err error) {
	// The modules first: the new agent's trial runs against its bound,
	// which a download of modules on a slow link must not take.
	if err := c.stage(d.tools); err != nil {
		return false, err
	}
	var trial string
	switch {
	case d.agent != "":
		if trial, err = c.updateAgent(d.agent, rev, d.trial, d.revert); err != nil {
			return false, c.ended(trial, err)
		}
	case d.revert != "":
		if err := c.revertAgent(d.revert); err != nil {
			return false, err
		}
	}
	apply := protocol.Command{ToolName: protocol.ApplyRevisionName, ToolType: protocol.ToolAction,
		Parameters: protocol.ApplyRevisionParams(protocol.Revision{Rollout: c.rollout, Number: rev, Tools: d.tools})}
	if _, err := c.command(apply); err != nil {
		return false, c.ended(trial, fmt.Errorf("apply revision %d: %w", rev, err))
	}
	if health == nil {
		return true, c.ended(trial, nil)
	}
	// The health checks pass admission against the device's inventory:
	// the one it registers once the revision is applied. No tools
	// change the inventory of a rollout of an agent alone, which the new
	// agent registered already.
	if len(d.tools) == 0 {
		return true, c.ended(trial, c.checkHealth(health))
	}
	if err := c.e.reported(c.ctx, c.device, c.rollout, rev); err != nil {
		return true, c.ended(trial, fmt.Errorf("revision %d applied, but the device did not report it: %w", rev, err))
	}
	return true, c.ended(trial, c.checkHealth(health))
}

// ended ends the trial of the agent release trial, if one started: it is
// committed when the change succeeded, and rejected, with err, when not.
func (c *deviceChange) ended(trial string, err error) error {
	if trial == "" {
		return err
	}
	return c.endTrial(trial, err)
}

// stage sends the device each module of tools that it does not report
// keeping.
func (c *deviceChange) stage(tools map[string]string) error {
	var kept []string
	if info := c.e.cfg.Inventory(c.ctx, c.device); info != nil {
		_, kept = protocol.RolloutsFromMetadata(info.CustomMetadata)
	}
	for _, tool := range slices.Sorted(maps.Keys(tools)) {
		sha := tools[tool]
		if slices.Contains(kept, sha) {
			continue
		}
		params, err := c.e.stageParams(c.ctx, sha)
		if err != nil {
			return fmt.Errorf("stage %s: %w", tool, err)
		}
		cmd := protocol.Command{ToolName: protocol.StageModuleName, ToolType: protocol.ToolAction, Parameters: params}
		if _, err := c.command(cmd); err != nil {
			return fmt.Errorf("stage %s (%.12s): %w", tool, sha, err)
		}
	}
	return nil
}

// asker is who the change's tasks are asked by: the rollout.
func (c *deviceChange) asker() tasks.Asker {
	return tasks.Asker{Who: identity.RolloutCaller(c.rollout), Kind: api.RequesterRollout, Client: c.rollout}
}

// command runs one action on the device as a task, with what is left of
// the device timeout as its timeout, and answers its result.
func (c *deviceChange) command(action protocol.Command) (protocol.Result, error) {
	left, err := c.left()
	if err != nil {
		return protocol.Result{}, err
	}
	resp, err := c.e.cfg.Tasks.RunCommand(c.ctx, tasks.CommandTask{Asker: c.asker(), Device: c.device,
		Actions: []protocol.Command{action}, Timeout: left.String(), TimeoutArg: "device_timeout"})
	if resp.SessionID != "" {
		c.lastTask = resp.SessionID
	}
	if err != nil {
		return protocol.Result{}, err
	}
	if reason := resp.FirstError(); reason != "" {
		return protocol.Result{}, errors.New(reason)
	}
	if len(resp.Results) == 0 {
		return protocol.Result{}, errors.New("the device answered no result")
	}
	return resp.Results[0], nil
}

// left is what is left of the device timeout, in whole seconds as a
// command's timeout takes it.
func (c *deviceChange) left() (time.Duration, error) {
	deadline, _ := c.ctx.Deadline()
	left := time.Until(deadline).Truncate(time.Second)
	if left < time.Second {
		return 0, fmt.Errorf("device_timeout %s passed", c.timeout)
	}
	return left, nil
}

// checkHealth runs the health checks as a plan task and waits for it;
// past the device timeout it is cancelled.
func (c *deviceChange) checkHealth(p *plan.Plan) error {
	s, err := c.e.cfg.Tasks.StartPlan(c.ctx, tasks.PlanTask{Asker: c.asker(), Device: c.device, Plan: p,
		TaskName: plan.SanitizeTaskName(fmt.Sprintf("rollout-%s-health-%s", c.rollout, c.device))})
	if err != nil {
		return fmt.Errorf("health checks: %w", err)
	}
	c.lastTask = s.ID
	select {
	case <-s.Done():
	case <-c.ctx.Done():
		c.e.cfg.Tasks.Cancel(s.ID, fmt.Sprintf("device_timeout %s passed", c.timeout))
		<-s.Done()
	}
	task, err := c.e.cfg.Tasks.Task(context.WithoutCancel(c.ctx), s.ID)
	if err != nil {
		return fmt.Errorf("health checks: %w", err)
	}
	if task.State != string(api.StateCompleted) {
		return fmt.Errorf("health checks %s: %s", task.State, task.Error)
	}
	return nil
}
