package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/spf13/cobra"
)

func newPlanCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Check plans before they run",
	}
	cmd.AddCommand(newPlanValidateCmd(g))
	return cmd
}

func newPlanValidateCmd(g *globals) *cobra.Command {
	var device string
	var labels []string
	cmd := &cobra.Command{
		Use:   "validate PLAN [--device ID | --label KEY=VALUE...]",
		Short: "Check a plan, and with a device or labels ask the server whether it would run there",
		Long: `Check a plan (a YAML or JSON file; - reads standard input): that it
parses, each problem reported with its line, column and key path.

With --device or --label, also ask the server's admission stage whether
it would run on that device, or on every device with the labels, without
running anything: that each step names a tool the device has, with
parameters its input schema takes, within the server's limits. Every
problem is listed at once. An offline device is checked against its last
registration, whose tools may have changed since; aipctl says so.

Exits 0 when the plan is valid (and would be admitted), 1 when it is not.`,
		Example: `  aipctl plan validate plan.yaml
  aipctl plan validate plan.yaml --device kiosk-1
  aipctl plan validate plan.yaml --label site=lobby`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if device != "" && len(labels) > 0 {
				return &exitError{exitUsage, errors.New("give either --device or --label, not both")}
			}
			target, err := parseLabels(labels)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			doc, err := readPlan(cmd.InOrStdin(), args[0])
			if err != nil {
				return &exitError{exitFailed, err}
			}
			if device == "" && len(target) == 0 {
				if g.json() {
					return printJSON(cmd.OutOrStdout(), map[string]bool{"valid": true})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: valid; pass --device or --label to check it against devices\n", planName(args[0]))
				return nil
			}
			return g.dryRun(cmd, args[0], api.AdmissionRequest{Device: device, Labels: target}, doc)
		},
	}
	cmd.Flags().StringVar(&device, "device", "", "check the plan against this device's tools")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "check the plan against every device with this label, KEY=VALUE (repeatable: all must match)")
	cmd.RegisterFlagCompletionFunc("device", completeDevices(g))
	return cmd
}

// dryRun asks the server's admission stage whether the plan doc, read
// from path, would run on req's devices, and prints its verdict: exit 0
// if admitted, 1 if not.
func (g *globals) dryRun(cmd *cobra.Command, path string, req api.AdmissionRequest, doc string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	req.Plan, _ = json.Marshal(doc)
	verdict, err := c.Admission(cmd.Context(), req)
	if err != nil {
		return apiFailure(err)
	}
	w := cmd.OutOrStdout()
	if g.json() {
		err = printJSON(w, verdict)
	} else {
		err = printVerdict(w, planName(path), verdict, time.Now())
	}
	if err != nil {
		return &exitError{exitFailed, err}
	}
	if !verdict.Admitted {
		return &exitError{code: exitFailed}
	}
	return nil
}

// printVerdict shows admission's verdict on the plan name: admitted, or
// refused with every problem; then each device that was offline, whose
// tools may have changed since it last registered.
func printVerdict(w io.Writer, name string, v api.AdmissionResponse, now time.Time) error {
	ids := make([]string, len(v.Devices))
	for i, d := range v.Devices {
		ids[i] = d.ID
	}
	if v.Admitted {
		fmt.Fprintf(w, "%s: would run on %s\n", name, strings.Join(ids, ", "))
	} else {
		fmt.Fprintf(w, "%s: would be refused:\n", name)
		for _, p := range v.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	for _, d := range v.Devices {
		if d.Online {
			continue
		}
		if d.LastSeen == nil {
			fmt.Fprintf(w, "note: %s has never registered: its tools are not known, so no tool was checked\n", d.ID)
			continue
		}
		fmt.Fprintf(w, "note: %s is offline (last seen %s ago): checked against the tools of its last registration, which may be stale\n",
			d.ID, now.Sub(*d.LastSeen).Round(time.Second))
	}
	return nil
}

// planName is how a plan file is named to the user.
func planName(path string) string {
	if path == "-" {
		return "<stdin>"
	}
	return path
}
