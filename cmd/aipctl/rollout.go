package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/rollout"
	"github.com/spf13/cobra"
)

func newRolloutCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "rollout", Short: "Keep devices at a desired set of tools: apply rollouts, watch them, pause, resume or roll them back"}
	cmd.AddCommand(newRolloutApplyCmd(g), newRolloutStatusCmd(g), newRolloutListCmd(g), newRolloutHistoryCmd(g),
		newRolloutControlCmd(g, "pause", "Stop a rollout from starting changes; those running finish"),
		newRolloutControlCmd(g, "resume", "Resume a paused rollout (its failed devices are tried again), or open the next wave of one waiting for approval"),
		newRolloutControlCmd(g, "rollback", "Take a rollout back to its previous revision on every device it changed"))
	return cmd
}

func newRolloutApplyCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "apply FILE",
		Short: "Upload a rollout file's modules and make it the rollout's newest revision; prints the revision",
		Long: `Apply a rollout file (README, "Rollouts"). aipctl checks the file, uploads
each module it names (paths relative to the file; the server keeps them by
SHA-256) and sends the rollout. A file equal to the rollout's current
revision makes no new one.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return &exitError{exitUsage, err}
			}
			spec, err := rollout.Parse(data)
			if err != nil {
				return &exitError{exitUsage, fmt.Errorf("%s: %w", args[0], err)}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			for i, path := range spec.Tools {
				if !filepath.IsAbs(path) {
					path = filepath.Join(filepath.Dir(args[0]), path)
				}
				wasm, err := readModule(path)
				if err != nil {
					return err
				}
				m, err := c.PutModule(cmd.Context(), wasm)
				if err != nil {
					return apiFailure(fmt.Errorf("%s: %w", path, err))
				}
				spec.Tools[i] = m.SHA256
			}
			body, err := json.Marshal(spec)
			if err != nil {
				return err
			}
			out, err := c.ApplyRollout(cmd.Context(), body)
			if err != nil {
				return apiFailure(err)
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), out)
			}
			return printApplied(cmd.OutOrStdout(), out)
		},
	}
}

func printApplied(w io.Writer, a api.RolloutApplied) error {
	what := "new revision"
	if a.Unchanged {
		what = "unchanged: already the current revision"
	}
	fmt.Fprintf(w, "rollout %s: revision %d (%s), %d devices selected\n", a.Name, a.Revision, what, a.Selected)
	if a.Note != "" {
		fmt.Fprintln(w, "note:", a.Note)
	}
	return nil
}

func newRolloutStatusCmd(g *globals) *cobra.Command {
	var watch bool
	cmd := &cobra.Command{
		Use:   "status NAME [--watch]",
		Short: "Show a rollout: its state, each wave, and each device",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fetch := func(c *api.Client, ctx context.Context) (api.Rollout, error) { return c.Rollout(ctx, args[0]) }
			if !watch {
				return show(cmd, g, fetch, printRollout)
			}
			return watchRollout(cmd, g, fetch)
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "show it again every 2 s until it is done, paused, rolled back or waits for approval")
	return cmd
}

// watchRollout shows a rollout until it settles, each time it changes.
func watchRollout(cmd *cobra.Command, g *globals, fetch func(*api.Client, context.Context) (api.Rollout, error)) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	last := ""
	for {
		r, err := fetch(c, cmd.Context())
		if err != nil {
			return apiFailure(err)
		}
		if b, _ := json.Marshal(r); string(b) != last {
			last = string(b)
			if g.json() {
				err = printJSON(cmd.OutOrStdout(), r)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "--- %s\n", time.Now().Format(time.TimeOnly))
				err = printRollout(cmd.OutOrStdout(), r)
			}
			if err != nil {
				return err
			}
		}
		switch r.State {
		case api.RolloutDone, api.RolloutPaused, api.RolloutRolledBack, api.RolloutApproval:
			return nil
		}
		select {
		case <-cmd.Context().Done():
			return cmd.Context().Err()
		case <-time.After(2 * time.Second):
		}
	}
}

func printRollout(w io.Writer, r api.Rollout) error {
	fmt.Fprintf(w, "rollout %s: %s, revision %d of %d, selector %s\n", r.Name, r.State, r.Revision, r.Latest, r.Selector)
	if r.Reason != "" {
		fmt.Fprintln(w, "reason:", r.Reason)
	}
	if r.Agent != "" {
		fmt.Fprintf(w, "  agent %s\n", r.Agent)
	}
	for _, t := range slices.Sorted(maps.Keys(r.Tools)) {
		fmt.Fprintf(w, "  tool %s  sha256:%.12s\n", t, r.Tools[t])
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WAVE\tSIZE\tOPEN\tDEVICES\tSTATES")
	for i, wv := range r.Waves {
		fmt.Fprintf(tw, "%d\t%s\t%v\t%d\t%s\n", i+1, wv.Size, wv.Open, wv.Devices, counts(wv.Counts))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Devices) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tWAVE\tSTATE\tONLINE\tAPPLIED\tTASK\tERROR")
	for _, d := range r.Devices {
		state := d.State
		if len(d.Drift) > 0 {
			state += " (" + strings.Join(slices.Sorted(maps.Keys(d.Drift)), ",") + " by hand)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%v\t%s\t%s\t%s\n", d.DeviceID, d.Wave+1, state, d.Online, revisionText(d.Applied), cmp.Or(d.TaskID, "-"), cmp.Or(d.Error, "-"))
	}
	return tw.Flush()
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", s, m[s]))
	}
	return strings.Join(parts, ", ")
}

func revisionText(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func newRolloutListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the rollouts: state, revision and how many devices are in each state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(cmd, g, (*api.Client).Rollouts, func(w io.Writer, all []api.Rollout) error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tSTATE\tREVISION\tSELECTOR\tDEVICES")
				for _, r := range all {
					fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\n", r.Name, r.State, r.Revision, r.Latest, r.Selector, counts(r.Counts))
				}
				return tw.Flush()
			})
		},
	}
}

func newRolloutHistoryCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "history NAME",
		Short: "List a rollout's revisions, newest first, with who applied each and how it ended",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fetch := func(c *api.Client, ctx context.Context) ([]api.RolloutRevision, error) {
				return c.RolloutHistory(ctx, args[0])
			}
			return show(cmd, g, fetch, func(w io.Writer, revs []api.RolloutRevision) error {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "REVISION\tAPPLIED\tBY\tTOOLS\tOUTCOME")
				for _, r := range revs {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", r.Revision, r.CreatedAt.Local().Format(time.DateTime), cmp.Or(r.CreatedBy, "-"),
						strings.Join(slices.Sorted(maps.Keys(r.Tools)), ","), cmp.Or(r.Outcome, "current"))
				}
				return tw.Flush()
			})
		},
	}
}

func newRolloutControlCmd(g *globals, action, short string) *cobra.Command {
	return &cobra.Command{
		Use:   action + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fetch := func(c *api.Client, ctx context.Context) (api.Rollout, error) {
				return c.ControlRollout(ctx, args[0], action)
			}
			return show(cmd, g, fetch, printRollout)
		},
	}
}
