package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/spf13/cobra"
)

func newDevicesCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "devices",
		Short: "List enrolled devices: online state, last seen, platform, agent version, labels and tools",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(cmd, g, (*api.Client).Devices, printDevices)
		},
	}
}

func printDevices(w io.Writer, devs []api.Device) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tONLINE\tLAST SEEN\tPLATFORM\tAGENT\tLABELS\tTOOLS")
	for _, d := range devs {
		platform, agent, tools := "-", "-", 0
		if d.Info != nil {
			platform, agent, tools = d.Info.Platform+"/"+d.Info.Arch, orDash(d.Info.AgentVersion), len(d.Info.Tools)
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\t%s\t%d\n", d.ID, d.Online, lastSeen(d.LastSeen), platform, agent, labels(d.Labels), tools)
	}
	return tw.Flush()
}

func lastSeen(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return time.Since(*t).Round(time.Second).String() + " ago"
}

func labels(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	kv := make([]string, 0, len(m))
	for k, v := range m {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

// show fetches a value with the operator's client and prints it: as JSON
// with -o json, otherwise as table writes it.
func show[T any](cmd *cobra.Command, g *globals, fetch func(*api.Client, context.Context) (T, error), table func(io.Writer, T) error) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	v, err := fetch(c, cmd.Context())
	if err != nil {
		return apiFailure(err)
	}
	if g.json() {
		return printJSON(cmd.OutOrStdout(), v)
	}
	return table(cmd.OutOrStdout(), v)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
