package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/spf13/cobra"
)

func newToolsCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "tools DEVICE",
		Short: "List a device's tools as it last registered them; -o json adds their schemas",
		Args:  cobra.ExactArgs(1),
		// The device's tools, as opposed to aipctl tool, which builds them.
		ValidArgsFunction: completeDevices(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(cmd, g, func(c *api.Client, ctx context.Context) ([]protocol.MCPToolInfo, error) {
				return c.DeviceTools(ctx, args[0])
			}, printTools)
		},
	}
}

func printTools(w io.Writer, tools []protocol.MCPToolInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tTOOL\tTYPE\tSIGNATURE\tDESCRIPTION")
	for _, t := range tools {
		sig, _ := t.Meta["signature"].(string)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", orDash(t.Namespace), t.ToolName, t.ToolType, orDash(sig), truncate(t.Description, 60))
	}
	return tw.Flush()
}
