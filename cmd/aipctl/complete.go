package main

import (
	"context"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/spf13/cobra"
)

// completionTimeout bounds asking the server while the shell waits.
const completionTimeout = 2 * time.Second

// completeDevices completes the first argument with the enrolled devices'
// ids, asking the server.
func completeDevices(g *globals) cobra.CompletionFunc {
	return completeFirst(g, func(ctx context.Context, c *api.Client) ([]cobra.Completion, error) {
		devs, err := c.Devices(ctx)
		out := make([]cobra.Completion, len(devs))
		for i, d := range devs {
			state := "offline"
			if d.Online {
				state = "online"
			}
			out[i] = cobra.CompletionWithDesc(d.ID, state)
		}
		return out, err
	})
}

// completeIdentities completes the first argument with the operator
// identities' names, asking the server.
func completeIdentities(g *globals) cobra.CompletionFunc {
	return completeFirst(g, func(ctx context.Context, c *api.Client) ([]cobra.Completion, error) {
		ids, err := c.Identities(ctx)
		out := make([]cobra.Completion, len(ids))
		for i, id := range ids {
			out[i] = cobra.CompletionWithDesc(id.Name, id.Role)
		}
		return out, err
	})
}

// completeFirst completes the first argument with what list finds on the
// server, within completionTimeout; nothing if it fails.
func completeFirst(g *globals, list func(context.Context, *api.Client) ([]cobra.Completion, error)) cobra.CompletionFunc {
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
		out, err := list(ctx, c)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeExec completes exec's arguments: the device, then the tools it
// last registered.
func completeExec(g *globals) cobra.CompletionFunc {
	devices := completeDevices(g)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			return devices(cmd, args, toComplete)
		case 1:
			return deviceTools(cmd, g, args[0])
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// deviceTools completes the names of a device's tools, asking the server;
// the description is the tool's namespace and type.
func deviceTools(cmd *cobra.Command, g *globals, device string) ([]cobra.Completion, cobra.ShellCompDirective) {
	c, err := g.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	tools, err := c.DeviceTools(ctx, device)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	seen := map[string]bool{}
	for _, t := range tools {
		if seen[t.ToolName] {
			continue // the same name in two namespaces
		}
		seen[t.ToolName] = true
		out = append(out, cobra.CompletionWithDesc(t.ToolName, strings.TrimSpace(t.Namespace+" "+string(t.ToolType))))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
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

// completeFormats completes an output format.
func completeFormats(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return []cobra.Completion{"table", "json"}, cobra.ShellCompDirectiveNoFileComp
}
