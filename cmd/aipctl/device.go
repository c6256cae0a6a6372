package main

import (
	"fmt"
	"strings"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/spf13/cobra"
)

func newDeviceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "device", Short: "Enroll and revoke devices"}
	var labels []string
	enroll := &cobra.Command{
		Use:   "enroll ID",
		Short: "Enroll a device and print its token (shown only this once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			req := api.EnrollRequest{ID: args[0], Labels: map[string]string{}}
			for _, l := range labels {
				k, v, ok := strings.Cut(l, "=")
				if !ok || k == "" {
					return &exitError{exitUsage, fmt.Errorf("--label %q: want KEY=VALUE", l)}
				}
				req.Labels[k] = v
			}
			resp, err := c.Enroll(cmd.Context(), req)
			if err != nil {
				return apiFailure(err)
			}
			if g.output == "json" {
				return printJSON(cmd.OutOrStdout(), resp)
			}
			fmt.Fprintln(cmd.OutOrStdout(), resp.Token)
			return nil
		},
	}
	enroll.Flags().StringArrayVar(&labels, "label", nil, "label KEY=VALUE (repeatable)")
	cmd.AddCommand(enroll)
	return cmd
}
