package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/plan"
	"github.com/spf13/cobra"
)

// dispatchOptions are aipctl dispatch's flags.
type dispatchOptions struct {
	labels       []string
	taskName     string
	wait         bool
	concurrency  int
	abortPercent int
	key          string
	dryRun       bool
}

func newDispatchCmd(g *globals) *cobra.Command {
	var o dispatchOptions
	cmd := &cobra.Command{
		Use:   "dispatch (DEVICE | --label KEY=VALUE...) PLAN [--wait]",
		Short: "Run a plan on a device, or on every device whose labels match",
		Long: `Run a plan (a YAML or JSON file; - reads standard input) on a device, or,
with --label, on every enrolled device that has all the labels: a fleet,
run by the server at most --concurrency devices at once, which stops
starting devices once --abort-percent of them have failed.

The server runs the task in the background; aipctl prints its id alone
on standard output (ID=$(aipctl dispatch ...) works). With
--wait it follows the task: a live line per device (step i/n, current
tool, elapsed), then a summary; it exits 1 unless the task completed.
Interrupting the wait leaves the task running: aipctl task ID --wait
takes it up again.

With --dry-run nothing runs: the server's admission stage checks the
plan on the device(s), and aipctl prints its verdict, every problem at
once, as aipctl plan validate does (exit 1 if it would be refused).`,
		Example: `  aipctl dispatch kiosk-1 plan.yaml --wait
  aipctl dispatch --label site=lobby --concurrency 5 --abort-percent 20 plan.yaml --wait`,
		Args: func(cmd *cobra.Command, args []string) error {
			want := 2
			if len(o.labels) > 0 {
				want = 1
			}
			if len(args) != want {
				return &exitError{exitUsage, errors.New("want DEVICE PLAN, or --label KEY=VALUE and PLAN")}
			}
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 && len(o.labels) == 0 {
				return completeDevices(g)(cmd, args, toComplete)
			}
			return []cobra.Completion{"yaml", "yml", "json"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			labels, err := parseLabels(o.labels)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			planDoc, err := readPlan(cmd.InOrStdin(), args[len(args)-1])
			if err != nil {
				return &exitError{exitUsage, err}
			}
			if o.dryRun {
				req := api.AdmissionRequest{Labels: labels}
				if len(labels) == 0 {
					req.Device = args[0]
				}
				return g.dryRun(cmd, args[len(args)-1], req, planDoc)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, w := cmd.Context(), cmd.OutOrStdout()
			key := idempotencyKey(o.key)
			var id string
			var devices []string
			var resp any
			if len(labels) > 0 {
				doc, _ := json.Marshal(planDoc)
				f, err := c.Fleet(ctx, api.FleetRequest{Labels: labels, Plan: doc, TaskName: o.taskName,
					Concurrency: o.concurrency, AbortPercent: o.abortPercent, IdempotencyKey: key})
				if err != nil {
					return startFailure(err, key)
				}
				id, devices, resp = f.SessionID, f.Devices, f
			} else {
				d, err := c.Dispatch(ctx, api.DispatchRequest{ClientID: args[0], Request: planDoc, TaskName: o.taskName, IdempotencyKey: key})
				if err != nil {
					return startFailure(err, key)
				}
				id, devices, resp = d.SessionID, []string{args[0]}, d
			}
			if o.wait {
				if !g.json() {
					fmt.Fprintf(w, "task %s on %d device(s)\n", id, len(devices))
				}
				return g.follow(ctx, c, w, id, devices)
			}
			if g.json() {
				return printJSON(w, resp)
			}
			// The id alone on stdout, so that ID=$(aipctl dispatch ...) works;
			// the sentence is for the person at the terminal.
			fmt.Fprintln(w, id)
			fmt.Fprintf(cmd.ErrOrStderr(), "task started on %d device(s); follow it with: aipctl task %s --wait\n", len(devices), id)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.labels, "label", nil, "run on every device with this label, KEY=VALUE (repeatable: all must match)")
	f.StringVar(&o.taskName, "task-name", "", "the task's name (default: the plan's task_name)")
	f.BoolVar(&o.wait, "wait", false, "follow the task until it ends, with a live line per device")
	f.IntVar(&o.concurrency, "concurrency", api.DefaultFleetConcurrency, "with --label: devices running the plan at once")
	f.IntVar(&o.abortPercent, "abort-percent", 0, "with --label: stop starting devices once this % of them failed (0: never)")
	f.StringVar(&o.key, "idempotency-key", "", keyFlagUsage)
	f.BoolVar(&o.dryRun, "dry-run", false, "run nothing: ask the server whether it would admit the plan on the device(s), as plan validate does; exit 1 if not")
	return cmd
}

// readPlan reads a plan file, or standard input for "-", and checks it
// here first, so that a plan that does not parse is reported with its
// file, line and column rather than as the server's answer. A plan whose
// aliases expand past what this side measures is left to the server,
// whose limit may be higher.
func readPlan(stdin io.Reader, path string) (string, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("plan: %w", err)
	}
	if len(b) == 0 {
		return "", fmt.Errorf("plan %s is empty", path)
	}
	_, err = plan.Parse(b)
	var big *plan.ExpandedError
	if err != nil && !errors.As(err, &big) {
		return "", planFailure(path, err)
	}
	return string(b), nil
}

// planFailure says what is wrong with the plan file path.
func planFailure(path string, err error) error {
	if path == "-" {
		path = "<stdin>"
	}
	var bad *plan.Error
	if errors.As(err, &bad) {
		return fileFailure(path, "the plan is not valid", bad.Problems)
	}
	return fmt.Errorf("%s: %w", path, err)
}
