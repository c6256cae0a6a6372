package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/spf13/cobra"
)

// aipctl operator manages operator identities: who may use the server,
// with which role, on which devices and tools.

func newOperatorCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "operator", Short: "Manage operator identities: their roles, scopes and tokens (an unscoped admin's)"}
	cmd.AddCommand(newOperatorAddCmd(g), newOperatorListCmd(g), newOperatorRevokeCmd(g), newOperatorRotateCmd(g))
	return cmd
}

func newOperatorAddCmd(g *globals) *cobra.Command {
	var (
		role    string
		devices []string
		tools   []string
	)
	cmd := &cobra.Command{
		Use:   "add NAME --role ROLE [--devices KEY=VALUE...] [--tools PATTERN...] [--out FILE]",
		Short: "Add an identity and print its token (shown only this once)",
		Long: `Add an operator identity and print its token, which the server keeps only
a hash of. --role is viewer (reads), operator (also runs commands, plans
and fleets), deployer (also deploys tools) or admin (also enrolls devices
and manages identities). --devices and --tools narrow it to a scope: a
device outside it, or a task on one, is as if it did not exist for the
identity, and so is a tool outside it.

  --devices site=lobby              devices with that label (KEY!=VALUE: without it)
  --tools data_collection::*        tools of that type (action, data_collection or *)
  --tools 'hash_*'                  tools of any type whose name the pattern matches`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.IdentityRequest{Name: args[0], Role: role}
			if len(devices) > 0 || len(tools) > 0 {
				req.Scope = &api.Scope{Devices: strings.Join(devices, ","), Tools: tools}
			}
			return show(cmd, g, func(c *api.Client, ctx context.Context) (api.TokenResponse, error) {
				return c.AddIdentity(ctx, req)
			}, printToken)
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "viewer, operator, deployer or admin (required)")
	cmd.Flags().StringArrayVar(&devices, "devices", nil, "scope: a label selector, KEY=VALUE or KEY!=VALUE (repeatable: all must hold)")
	cmd.Flags().StringArrayVar(&tools, "tools", nil, "scope: a tool pattern, TYPE::GLOB or GLOB (repeatable: any may match)")
	cmd.MarkFlagRequired("role")
	withSecretOut(cmd, "token")
	cmd.RegisterFlagCompletionFunc("role", cobra.FixedCompletions(
		[]string{api.RoleViewer, api.RoleOperator, api.RoleDeployer, api.RoleAdmin}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// printToken prints a new token alone, so that it can go straight to a
// file.
func printToken(w io.Writer, t api.TokenResponse) error {
	_, err := fmt.Fprintln(w, t.Token)
	return err
}

func newOperatorListCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the identities: role, scope and the ids of their tokens",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(cmd, g, (*api.Client).Identities, printIdentities)
		},
	}
}

func printIdentities(w io.Writer, ids []api.Identity) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tDEVICES\tTOOLS\tTOKENS\tCREATED")
	for _, id := range ids {
		devices, tools := "*", "*"
		if id.Scope != nil {
			devices = orDefault(id.Scope.Devices, "*")
			tools = orDefault(strings.Join(id.Scope.Tools, ","), "*")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", id.Name, id.Role, devices, tools, tokenList(id.Tokens), ago(id.CreatedAt))
	}
	return tw.Flush()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// tokenList is the ids of tokens, each with when it ends if a rotation
// ends it.
func tokenList(tokens []api.IdentityToken) string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		out[i] = t.ID
		if t.ExpiresAt != nil {
			out[i] += fmt.Sprintf(" (ends in %s)", time.Until(*t.ExpiresAt).Round(time.Second))
		}
	}
	return strings.Join(out, ", ")
}

func newOperatorRevokeCmd(g *globals) *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:               "revoke NAME [--token ID]",
		Short:             "Revoke an identity, or one of its tokens: they stop working, and what they have open closes",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeIdentities(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			what := args[0]
			if token == "" {
				err = c.RevokeIdentity(cmd.Context(), args[0])
			} else {
				what = fmt.Sprintf("token %s of %s", token, args[0])
				err = c.RevokeToken(cmd.Context(), args[0], token)
			}
			if err != nil {
				return apiFailure(err)
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), map[string]any{"identity": args[0], "token_id": token, "revoked": true})
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", what)
			return err
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "revoke only this token (its id, as operator list shows it)")
	return cmd
}

func newOperatorRotateCmd(g *globals) *cobra.Command {
	var grace time.Duration
	cmd := &cobra.Command{
		Use:               "rotate NAME [--grace D] [--out FILE]",
		Short:             "Give an identity a new token and print it (shown only this once); its other tokens stop working after --grace",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeIdentities(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if grace < 0 {
				return &exitError{exitUsage, fmt.Errorf("--grace: %s: want 0 or more", grace)}
			}
			return show(cmd, g, func(c *api.Client, ctx context.Context) (api.TokenResponse, error) {
				return c.RotateIdentity(ctx, args[0], grace)
			}, func(w io.Writer, t api.TokenResponse) error {
				if len(t.Expiring) > 0 && grace > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "the old token(s) of %s stop working in %s\n", t.Identity, grace)
				}
				return printToken(w, t)
			})
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 0, "how long the identity's other tokens keep working (default: they stop at once)")
	withSecretOut(cmd, "token")
	return cmd
}
