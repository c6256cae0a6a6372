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

// auditPage is how many entries aipctl audit asks for at a time: the
// server's most.
const auditPage = 1000

func newAuditCmd(g *globals) *cobra.Command {
	var (
		q     api.AuditQuery
		since string
		limit int
	)
	cmd := &cobra.Command{
		Use:   "audit [--device ID] [--identity NAME] [--since 1h|TIME] [--session ID] [--limit N]",
		Short: "Read the audit log, oldest first: who (identity and token) ran which tool on which device, and changed which device or identity",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if q.Since, err = parseSince(since, time.Now()); err != nil {
				return &exitError{exitUsage, err}
			}
			if limit < 1 {
				return &exitError{exitUsage, fmt.Errorf("--limit: %d: want 1 or more", limit)}
			}
			return show(cmd, g, func(c *api.Client, ctx context.Context) ([]api.AuditEntry, error) {
				return auditEntries(ctx, c, q, limit)
			}, printAudit)
		},
	}
	cmd.Flags().StringVar(&q.Device, "device", "", "only this device's entries")
	cmd.Flags().StringVar(&q.Identity, "identity", "", "only this operator identity's entries")
	cmd.Flags().StringVar(&q.Session, "session", "", "only this task's entries")
	cmd.Flags().StringVar(&since, "since", "", "only entries from this long ago (1h, 30m) or from this time on (RFC 3339)")
	cmd.Flags().IntVar(&limit, "limit", 1000, "at most this many, the oldest that match (the server's pages are followed as far as it takes)")
	cmd.RegisterFlagCompletionFunc("device", completeDevices(g))
	cmd.RegisterFlagCompletionFunc("identity", completeIdentities(g))
	return cmd
}

// parseSince reads --since: a duration back from now, or a time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since: %q: want a duration (1h) or an RFC 3339 time (2026-11-25T09:00:00Z)", s)
	}
	return t, nil
}

// auditEntries reads up to limit entries q picks, following the pages.
func auditEntries(ctx context.Context, c *api.Client, q api.AuditQuery, limit int) ([]api.AuditEntry, error) {
	out := []api.AuditEntry{}
	for len(out) < limit {
		q.Limit = min(limit-len(out), auditPage)
		page, err := c.Audit(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < q.Limit {
			break
		}
		q.After = page[len(page)-1].Seq
	}
	return out, nil
}

func printAudit(w io.Writer, entries []api.AuditEntry) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tIDENTITY\tTOKEN\tACTOR\tDEVICE\tWHAT\tOUTCOME\tERROR")
	for _, e := range entries {
		what := e.Tool
		if e.Action != "" {
			what = e.Action + " " + strings.TrimSpace(string(e.Parameters))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.At.Local().Format(time.DateTime), orDefault(e.Identity, "-"),
			orDefault(e.TokenID, "-"), e.Actor, orDefault(e.DeviceID, "-"), what, e.Outcome, truncate(e.Error, 60))
	}
	return tw.Flush()
}
