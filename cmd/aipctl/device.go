package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/spf13/cobra"
)

func newDeviceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "device", Short: "Enroll and revoke devices, change their labels, rotate their tokens, sign their certificates"}
	cmd.AddCommand(newEnrollCmd(g), newRevokeCmd(g), newRotateCmd(g), newCertificateCmd(g), newLabelCmd(g))
	return cmd
}

func newEnrollCmd(g *globals) *cobra.Command {
	var labels []string
	var csrFile string
	cmd := &cobra.Command{
		Use:   "enroll ID [--label KEY=VALUE...] [--csr FILE] [--out FILE]",
		Short: "Enroll a device and print its token (shown only this once), or with --csr its certificate",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := parseLabels(labels)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			csr, err := readCSR(csrFile)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			resp, err := c.Enroll(cmd.Context(), api.EnrollRequest{ID: args[0], Labels: l, CSR: csr})
			if err != nil {
				return apiFailure(err)
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), resp)
			}
			if csr != "" {
				fmt.Fprint(cmd.OutOrStdout(), resp.Certificate)
				return nil
			}
			fmt.Fprintln(cmd.OutOrStdout(), resp.Token)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&labels, "label", nil, "label KEY=VALUE (repeatable)")
	cmd.Flags().StringVar(&csrFile, "csr", "", "PEM certificate request of the device's key: print the certificate the server signs for it, which stands in for the token")
	withSecretOut(cmd, "token, or with --csr the certificate")
	return cmd
}

func newCertificateCmd(g *globals) *cobra.Command {
	var csrFile string
	cmd := &cobra.Command{
		Use:               "certificate ID --csr FILE",
		Short:             "Have the server sign a certificate for an enrolled device's key, and print it (to renew one, say)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeDevices(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			csr, err := readCSR(csrFile)
			if err != nil {
				return err
			}
			if csr == "" {
				return &exitError{exitUsage, errors.New("--csr is required")}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			cert, err := c.SignCertificate(cmd.Context(), args[0], api.CertificateRequest{CSR: csr})
			if err != nil {
				return apiFailure(err)
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), cert)
			}
			fmt.Fprint(cmd.OutOrStdout(), cert.Certificate)
			return nil
		},
	}
	cmd.Flags().StringVar(&csrFile, "csr", "", "PEM certificate request of the device's key")
	return cmd
}

// readCSR reads the --csr file, "" if none was given.
func readCSR(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", &exitError{exitUsage, fmt.Errorf("--csr: %w", err)}
	}
	return string(b), nil
}

func newRotateCmd(g *globals) *cobra.Command {
	var req api.RotateRequest
	cmd := &cobra.Command{
		Use:   "rotate ID [--grace D] [--wait D]",
		Short: "Give a device a new token over its link; the old one stops working once the device has it (or after --grace)",
		Long: "The server sends the device a new token over its link, which the agent keeps and confirms. A device that is\n" +
			"not linked keeps its old token until it next connects, and gets the new one then. Devices on UFO's JSON wire\n" +
			"cannot be sent a token: enroll them again instead. Exit 1 if the device could not keep its new token.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeDevices(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			r, err := c.RotateToken(cmd.Context(), args[0], req)
			if err != nil {
				return apiFailure(err)
			}
			if g.json() {
				if err := printJSON(cmd.OutOrStdout(), r); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), describeRotation(r))
			}
			if r.Error != "" {
				return &exitError{exitFailed, nil}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&req.Grace, "grace", "", "how long the old token keeps working once the device has the new one (default 0s: it stops at once)")
	cmd.Flags().StringVar(&req.Wait, "wait", "", "how long to wait for a linked device to confirm (default 10s, at most 1m)")
	return cmd
}

// describeRotation says where a rotation stands, for people.
func describeRotation(r api.TokenRotation) string {
	switch {
	case r.State == api.RotationConfirmed && r.Grace != "0s":
		return fmt.Sprintf("%s: token rotated; the old one works for %s more", r.ID, r.Grace)
	case r.State == api.RotationConfirmed:
		return fmt.Sprintf("%s: token rotated; the old one no longer works", r.ID)
	case r.Error != "":
		return fmt.Sprintf("%s: token not rotated: %s\nthe device keeps its old token; it is offered a new one when it next connects", r.ID, r.Error)
	case r.SentAt != nil:
		return fmt.Sprintf("%s: new token sent, not yet confirmed; the old one works until the device confirms", r.ID)
	}
	return fmt.Sprintf("%s: rotation pending; the device keeps its old token until it next connects, and gets a new one then", r.ID)
}

func newRevokeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:               "revoke ID",
		Short:             "Revoke a device: its tokens stop working, its certificates are revoked, its link closes and its tasks are cancelled",
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
			return nil, fmt.Errorf("label %q: want KEY=VALUE", l)
		}
		out[k] = v
	}
	return out, nil
}

func newLabelCmd(g *globals) *cobra.Command {
	var remove []string
	cmd := &cobra.Command{
		Use:   "label ID [KEY=VALUE...] [--remove KEY...]",
		Short: "Set or remove a device's labels (admin): the rollouts that pick it, or no longer do, change it at once",
		Long: `Set or remove labels of an enrolled device. Labels decide scopes, fleets
and rollouts, so this takes an admin, and the audit log records it. A
rollout whose selector now picks the device brings it to its revision at
once; one that no longer does removes its tools. Labels that would have two
rollouts put a tool of the same name on the device are refused, naming both.`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: completeDevices(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			set, err := parseLabels(args[1:])
			if err != nil {
				return &exitError{exitUsage, err}
			}
			if len(set) == 0 && len(remove) == 0 {
				return &exitError{exitUsage, errors.New("name labels to set (KEY=VALUE) or to remove (--remove KEY)")}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			out, err := c.Label(cmd.Context(), args[0], api.LabelRequest{Set: set, Remove: remove})
			if err != nil {
				return apiFailure(err)
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), out)
			}
			l, _ := out["labels"].(map[string]any)
			kv := map[string]string{}
			for k, v := range l {
				kv[k] = fmt.Sprint(v)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", args[0], labels(kv))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&remove, "remove", nil, "label KEY to remove (repeatable)")
	return cmd
}
