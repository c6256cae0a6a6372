package main

import (
	"context"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/spf13/cobra"
)

// completionTimeout bounds asking the server while the shell waits.
const completionTimeout = 2 * time.Second

// completeDevices completes the first argument with the enrolled devices'
// ids, asking the server.
func completeDevices(g *globals) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveDefault
		}
		c, err := g.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		devs, err := c.Devices(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		out := make([]cobra.Completion, len(devs))
		for i, d := range devs {
			state := "offline"
			if d.Online {
				state = "online"
			}
			out[i] = cobra.CompletionWithDesc(d.ID, state)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeTasks completes a task id with the newest tasks, in state
// unless it is empty.
func completeTasks(g *globals, state api.TaskState) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := g.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		tasks, err := c.Tasks(ctx, state, 0)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		out := make([]cobra.Completion, len(tasks))
		for i, t := range tasks {
			out[i] = cobra.CompletionWithDesc(t.SessionID, string(t.State)+" "+t.TaskName)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
