package main

import (
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
		Short: "List enrolled devices: online state, last seen, platform, labels and tools",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			devs, err := c.Devices(cmd.Context())
			if err != nil {
				return apiFailure(err)
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), devs)
			}
			return printDevices(cmd.OutOrStdout(), devs)
		},
	}
}

func printDevices(w io.Writer, devs []api.Device) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tONLINE\tLAST SEEN\tPLATFORM\tLABELS\tTOOLS")
	for _, d := range devs {
		platform, tools := "-", 0
		if d.Info != nil {
			platform, tools = d.Info.Platform+"/"+d.Info.Arch, len(d.Info.Tools)
		}
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\t%d\n", d.ID, d.Online, lastSeen(d.LastSeen), platform, labels(d.Labels), tools)
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

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
