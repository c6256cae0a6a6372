package main

import (
	"time"

	"github.com/spf13/cobra"
)

func newDeployCmd(g *globals) *cobra.Command {
	var (
		namespace string
		timeout   time.Duration
		force     bool
	)
	cmd := &cobra.Command{
		Use:   "deploy DEVICE MODULE.wasm [--namespace NS]",
		Short: "Push a module to a device, which verifies, keeps and loads it without restarting",
		Long: `Push a module to a device. The agent checks its signature against its
trusted keys and its manifest against its policy, keeps it under its data
dir and loads it at once, in place of the namespace's tool of that name;
then it sends its new tool inventory. A module it refuses changes nothing.
A tool that a rollout owns on the device is refused, naming the rollout,
unless --force.

Prints the command's Results as JSON (-o json: the whole response); exits
0 when the device installed the module and 1 when it refused it.`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeDevices(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTimeout(timeout); err != nil {
				return err
			}
			wasm, err := readModule(args[1])
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			deploy := c.DeployTool
			if force {
				deploy = c.DeployToolOver
			}
			resp, err := deploy(cmd.Context(), args[0], wasm, namespace, timeout)
			if err != nil {
				return apiFailure(err)
			}
			return g.printResponse(cmd.OutOrStdout(), resp)
		},
	}
	cmd.Flags().StringVar(&namespace, "namespace", "", "namespace on the device (default: deployed)")
	cmd.Flags().BoolVar(&force, "force", false, "deploy a tool that a rollout owns on the device in place of the rollout's; the rollout's status shows it as drift")
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait for the device (at most 24h)")
	return cmd
}
