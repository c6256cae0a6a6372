package main

import (
	"fmt"
	"strings"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/spf13/cobra"
)

func newDeviceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "device", Short: "Enroll and revoke devices"}
	cmd.AddCommand(newEnrollCmd(g), newRevokeCmd(g))
	return cmd
}

func newEnrollCmd(g *globals) *cobra.Command {
	var labels []string
	cmd := &cobra.Command{
		Use:   "enroll ID [--label KEY=VALUE...]",
		Short: "Enroll a device and print its token (shown only this once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := parseLabels(labels)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			resp, err := c.Enroll(cmd.Context(), api.EnrollRequest{ID: args[0], Labels: l})
			if err != nil {
				return apiFailure(err)
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), resp)
			}
			fmt.Fprintln(cmd.OutOrStdout(), resp.Token)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&labels, "label", nil, "label KEY=VALUE (repeatable)")
	return cmd
}

func newRevokeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "revoke ID",
		Short:             "Revoke a device: its token stops working, its link closes and its tasks are cancelled",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeDevices(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.Revoke(cmd.Context(), args[0]); err != nil {
				return apiFailure(err)
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), map[string]any{"id": args[0], "revoked": true})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", args[0])
			return nil
		},
	}
}

// parseLabels reads KEY=VALUE flags.
func parseLabels(kvs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, l := range kvs {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--label %q: want KEY=VALUE", l)
		}
		out[k] = v
	}
	return out, nil
}
