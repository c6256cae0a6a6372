package main

import (
	"fmt"
	"io"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/plan"
	"github.com/spf13/cobra"
)

func newExecCmd(g *globals) *cobra.Command {
	var (
		paramsJSON string
		timeout    time.Duration
		toolType   string
		key        string
		verbose    bool
		waitDevice bool
	)
	cmd := &cobra.Command{
		Use:   "exec DEVICE TOOL [KEY=VALUE...]",
		Short: "Run one tool on a device and print its result",
		Long: `Run one tool on a device and print its Result as JSON.

Parameters come from --params (a JSON object) and KEY=VALUE arguments, which
override it. A VALUE is taken as the type the tool's input schema gives its
parameter, from the device's inventory: content=42 is the string "42" for a
string parameter and the number 42 for a number; -v says what was taken
otherwise than as it reads. For a parameter the schema does not type, or a
device that lists no tools, a VALUE that is JSON (a number, true, false,
null, an array, an object or a quoted string) is taken as that JSON, and
anything else as a string. A tool the device does not list is refused
before anything is sent, with the nearest name it has.

A command for a device whose agent stopped on purpose fails at once, "device
shut down"; with --wait-for-device it waits for the device to come back,
within --timeout, as it does for any device that is not online.

Prints the Results as JSON; -o json prints the whole response, with its
response_id and session_id. Exits 0 when the tool succeeded and 1 when it
failed.`,
		Args:              cobra.MinimumNArgs(2),
		ValidArgsFunction: completeExec(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTimeout(timeout); err != nil {
				return err
			}
			if _, _, err := buildParams(paramsJSON, args[2:], nil); err != nil {
				return &exitError{exitUsage, err}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			schema, err := toolSchema(cmd.Context(), c, args[0], args[1], protocol.ToolType(toolType))
			if err != nil {
				return err
			}
			params, coerced, err := buildParams(paramsJSON, args[2:], schema)
			if err != nil {
				return &exitError{exitUsage, fmt.Errorf("tool %s: %w", args[1], err)}
			}
			if verbose {
				for _, c := range coerced {
					fmt.Fprintln(cmd.ErrOrStderr(), c)
				}
			}
			req := api.CommandRequest{
				Actions:       []protocol.Command{{ToolName: args[1], ToolType: protocol.ToolType(toolType), Parameters: params}},
				WaitForDevice: waitDevice, IdempotencyKey: idempotencyKey(key),
			}
			// The server decides a command's default timeout; the client
			// waits for it by the same constant (api.ParseTimeout).
			if cmd.Flags().Changed("timeout") {
				req.Timeout = timeout.String()
			}
			ctx := cmd.Context()
			resp, err := c.Command(ctx, args[0], req)
			if err != nil && ctx.Err() != nil {
				return stoppedWaiting(args[0], req.IdempotencyKey)
			}
			if err != nil {
				return startFailure(err, req.IdempotencyKey)
			}
			return g.printResponse(cmd.OutOrStdout(), resp)
		},
	}
	cmd.Flags().StringVar(&paramsJSON, "params", "", "parameters as a JSON object")
	cmd.Flags().DurationVar(&timeout, "timeout", api.DefaultCommandTimeout, "how long to wait for the result (at most 24h)")
	cmd.Flags().StringVar(&toolType, "tool-type", "", "action or data_collection (default: whichever the device has)")
	cmd.Flags().StringVar(&key, "idempotency-key", "", keyFlagUsage)
	cmd.Flags().BoolVar(&waitDevice, "wait-for-device", false,
		"if the device is not online (its agent stopped, or its link is down), wait for it to register again, within --timeout, instead of failing")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "say which KEY=VALUE was taken otherwise than as it reads, for the tool's schema")
	return cmd
}

// stoppedWaiting is exec's error when it is interrupted (Ctrl-C) while
// it waits: as dispatch --wait says, it stopped waiting and the command
// goes on, and it says how to follow it. It cannot know the command's
// task, which the server names in its answer; its idempotency key stands
// for it.
func stoppedWaiting(device, key string) error {
	return &exitError{exitInterrupted, fmt.Errorf("stopped waiting; the command goes on on %s, if it reached the server: "+
		"to wait for its outcome again without running it twice, repeat this aipctl exec with --idempotency-key %s "+
		"(or find its task with aipctl tasks)", device, key)}
}

// checkTimeout refuses a --timeout the server would: it must be positive
// and at most a plan step's cap, which agents count on.
func checkTimeout(d time.Duration) error {
	if d <= 0 || d > plan.MaxTimeout {
		return &exitError{exitUsage, fmt.Errorf("--timeout: %s is outside (0, %s]", d, plan.MaxTimeout)}
	}
	return nil
}

// printResponse prints a command's Results, or with -o json the whole
// response, and fails with exitFailed unless every action succeeded.
func (g *globals) printResponse(w io.Writer, resp api.CommandResponse) error {
	var out any = resp.Results
	if g.json() {
		out = resp
	}
	if err := printJSON(w, out); err != nil {
		return &exitError{exitFailed, err}
	}
	if !resp.Succeeded() {
		return &exitError{code: exitFailed}
	}
	return nil
}
