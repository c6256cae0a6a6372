package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/spf13/cobra"
)

func newTaskCmd(g *globals) *cobra.Command {
	var wait bool
	cmd := &cobra.Command{
		Use:   "task ID [--wait]",
		Short: "Show a task: its state, steps and results, or each device's outcome for a fleet",
		Long: `Show a task: its state, steps and results, or each device's outcome for a
fleet. With --wait, follow a task that runs until it ends, as dispatch
--wait does; then exit 1 unless it completed.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeTasks(g, ""),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			t, err := c.Task(cmd.Context(), args[0])
			if err != nil {
				return apiFailure(err)
			}
			if wait {
				return g.follow(cmd.Context(), c, cmd.OutOrStdout(), t.SessionID, taskDevices(t))
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), t)
			}
			return printTask(cmd.OutOrStdout(), t)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the task until it ends")
	return cmd
}

func newTasksCmd(g *globals) *cobra.Command {
	var (
		state string
		limit int
	)
	cmd := &cobra.Command{
		Use:   "tasks [--state STATE] [--limit N]",
		Short: "List tasks, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			st := api.TaskState(state)
			if st != "" && !st.Valid() {
				return &exitError{exitUsage, fmt.Errorf("--state: %q: want created, running, completed, failed or cancelled", state)}
			}
			if limit < 1 {
				return &exitError{exitUsage, fmt.Errorf("--limit: %d: want 1 or more", limit)}
			}
			return show(cmd, g, func(c *api.Client, ctx context.Context) ([]api.TaskSummary, error) {
				return c.Tasks(ctx, st, limit)
			}, printTasks)
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only tasks in this state: created, running, completed, failed or cancelled")
	cmd.Flags().IntVar(&limit, "limit", api.DefaultTaskPage, "at most this many, the newest (the server's pages are followed as far as it takes)")
	cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(
		[]string{"created", "running", "completed", "failed", "cancelled"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func newCancelCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "cancel ID",
		Short:             "Cancel a running task (a fleet: its running devices too) and show how it ended",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeTasks(g, api.StateRunning),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(cmd, g, func(c *api.Client, ctx context.Context) (api.Task, error) {
				return c.CancelTask(ctx, args[0])
			}, func(w io.Writer, t api.Task) error {
				_, err := fmt.Fprintf(w, "task %s %s\n", t.SessionID, t.State)
				return err
			})
		},
	}
}

// taskDevices are the devices a task runs on: a fleet's, or its one.
func taskDevices(t api.Task) []string {
	if t.Kind != api.KindFleet {
		return []string{t.DeviceID}
	}
	var r api.FleetResult
	json.Unmarshal(t.Result, &r)
	ids := make([]string, len(r.Devices))
	for i, d := range r.Devices {
		ids[i] = d.DeviceID
	}
	return ids
}

// follow shows a task's progress until it ends, then its summary; with
// -o json, only the task as it ended. It fails with exitFailed unless the
// task completed.
func (g *globals) follow(ctx context.Context, c *api.Client, w io.Writer, id string, devices []string) error {
	onEvent := func(api.TaskEvent) error { return nil }
	if !g.json() {
		p := newProgress(w, terminalSize(w), devices)
		tctx, stop := context.WithCancel(ctx)
		defer stop()
		go p.tick(tctx)
		onEvent = func(e api.TaskEvent) error { p.event(e); return nil }
	}
	if err := c.Events(ctx, id, onEvent); err != nil {
		if ctx.Err() != nil {
			return &exitError{exitInterrupted, fmt.Errorf("stopped waiting; the task goes on: aipctl task %s --wait", id)}
		}
		return apiFailure(err)
	}
	t, err := c.Task(ctx, id)
	if err != nil {
		return apiFailure(err)
	}
	if g.json() {
		err = printJSON(w, t)
	} else {
		fmt.Fprintln(w)
		err = printSummary(w, t)
	}
	if err != nil {
		return &exitError{exitFailed, err}
	}
	if t.State != api.StateCompleted {
		return &exitError{code: exitFailed}
	}
	return nil
}

// printStepResults shows each step's results, under the table of steps,
// as far as the caller's scope lets the server show them: a step's own,
// or those that came after it had failed, which say so.
func printStepResults(w io.Writer, t api.Task, r api.PlanResult) error {
	header := false
	for _, s := range r.Steps {
		results, late := lateResults(t, s.Step)
		if !late {
			results = s.Results
		}
		if len(results) == 0 {
			continue
		}
		if !header {
			fmt.Fprint(w, "\nRESULTS\n")
			header = true
		}
		line := fmt.Sprintf("step %d %s", s.Step+1, s.Tool)
		if late {
			line += ": came late, after the step had failed; recorded all the same"
		}
		fmt.Fprintln(w, line)
		b, err := json.MarshalIndent(results, "  ", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %s\n", b)
	}
	if header {
		fmt.Fprintln(w)
	}
	return nil
}

// lateResults are the results of step's last attempt (a command's: step
// 0) if they came late, after it had failed.
func lateResults(t api.Task, step int) ([]protocol.Result, bool) {
	var last *api.CommandRecord
	for i, c := range t.Commands {
		if c.Step == step && (last == nil || c.Attempt > last.Attempt) {
			last = &t.Commands[i]
		}
	}
	if last == nil || !last.Late || len(last.Results) == 0 {
		return nil, false
	}
	return last.Results, true
}

func printTasks(w io.Writer, tasks []api.TaskSummary) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tKIND\tDEVICE\tSTATE\tCREATED\tTOOK")
	for _, t := range tasks {
		device := t.DeviceID
		if t.Kind == api.KindFleet {
			device = "(fleet)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.SessionID, orDash(t.TaskName), t.Kind, device, t.State,
			ago(t.CreatedAt), took(t))
	}
	return tw.Flush()
}

func ago(t time.Time) string { return time.Since(t).Round(time.Second).String() + " ago" }

func took(t api.TaskSummary) string {
	if t.StartedAt == nil {
		return "-"
	}
	end := time.Now()
	if t.FinishedAt != nil {
		end = *t.FinishedAt
	}
	return seconds(end.Sub(*t.StartedAt))
}

// printTask shows a task: its facts, then its summary.
func printTask(w io.Writer, t api.Task) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "task\t%s\n", t.SessionID)
	fmt.Fprintf(tw, "name\t%s\n", orDash(t.TaskName))
	fmt.Fprintf(tw, "kind\t%s\n", t.Kind)
	if t.DeviceID != "" {
		fmt.Fprintf(tw, "device\t%s\n", t.DeviceID)
	}
	if t.ParentID != "" {
		fmt.Fprintf(tw, "fleet\t%s\n", t.ParentID)
	}
	fmt.Fprintf(tw, "requester\t%s\n", t.Requester)
	fmt.Fprintf(tw, "state\t%s\n", t.State)
	fmt.Fprintf(tw, "created\t%s (%s)\n", t.CreatedAt.Local().Format(time.DateTime), ago(t.CreatedAt))
	if t.State.Ended() {
		fmt.Fprintf(tw, "took\t%s\n", took(t.TaskSummary))
	} else {
		fmt.Fprintf(tw, "running for\t%s\n", took(t.TaskSummary))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return printSummary(w, t)
}

// printSummary shows what a task did: each device's outcome (a fleet),
// each step's (a plan), or the results (a command); then one line. For a
// task that runs, the server's result is its progress so far: each
// step's state (pending, running, or how its last attempt went), its
// attempts and its last error.
func printSummary(w io.Writer, t api.Task) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	switch t.Kind {
	case api.KindFleet:
		var r api.FleetResult
		json.Unmarshal(t.Result, &r)
		fmt.Fprintln(tw, "DEVICE\tSTATE\tTASK\tERROR")
		for _, d := range r.Devices {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.DeviceID, d.State, orDash(d.SessionID), d.Error)
		}
	case api.KindPlan:
		var r api.PlanResult
		json.Unmarshal(t.Result, &r)
		fmt.Fprintln(tw, "STEP\tTOOL\tSTATUS\tATTEMPTS\tERROR")
		for _, s := range r.Steps {
			status := s.Status
			if _, late := lateResults(t, s.Step); late {
				status += " (results came late)"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\n", s.Step+1, s.Tool, status, s.Attempts, s.Error)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if err := printStepResults(w, t, r); err != nil {
			return err
		}
	default:
		var r api.CommandResponse
		json.Unmarshal(t.Result, &r)
		if err := printJSON(w, r.Results); err != nil {
			return err
		}
		if late, ok := lateResults(t, 0); ok {
			fmt.Fprintln(w, "its results came late, after the command had failed; recorded all the same:")
			if err := printJSON(w, late); err != nil {
				return err
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	line := fmt.Sprintf("%s %s", t.Kind, t.SessionID)
	if t.TaskName != "" {
		line += fmt.Sprintf(" (%s)", t.TaskName)
	}
	if t.DeviceID != "" {
		line += " on " + t.DeviceID
	}
	if t.State.Ended() {
		line += fmt.Sprintf(": %s, took %s", t.State, took(t.TaskSummary))
	} else {
		// Its steps are where it is so far (the server's progress).
		line += fmt.Sprintf(": %s for %s so far", t.State, took(t.TaskSummary))
	}
	if t.Error != "" {
		line += ": " + t.Error
	}
	_, err := fmt.Fprintln(w, line)
	return err
}
