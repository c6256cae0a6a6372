package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
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
	)
	cmd := &cobra.Command{
		Use:   "exec DEVICE TOOL [KEY=VALUE...]",
		Short: "Run one tool on a device and print its result",
		Long: `Run one tool on a device and print its Result as JSON.

Parameters come from --params (a JSON object) and KEY=VALUE arguments, which
override it. A VALUE that is JSON (a number, true, false, null, an array, an
object or a quoted string) is taken as that JSON; anything else is a string.

Prints the Results as JSON; -o json prints the whole response, with its
response_id and session_id. Exits 0 when the tool succeeded and 1 when it
failed.`,
		Args:              cobra.MinimumNArgs(2),
		ValidArgsFunction: completeExec(g),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTimeout(timeout); err != nil {
				return err
			}
			params, err := buildParams(paramsJSON, args[2:])
			if err != nil {
				return &exitError{exitUsage, err}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			req := api.CommandRequest{
				Actions: []protocol.Command{{ToolName: args[1], ToolType: protocol.ToolType(toolType), Parameters: params}},
				Timeout: timeout.String(), IdempotencyKey: idempotencyKey(key),
			}
			ctx := cmd.Context()
			resp, err := c.Command(ctx, args[0], req)
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
	return cmd
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

// buildParams merges --params with KEY=VALUE arguments.
func buildParams(paramsJSON string, kvs []string) (map[string]any, error) {
	params := map[string]any{}
	if paramsJSON != "" {
		// JSON null decodes into a map without error, leaving it nil.
		params = nil
		if err := json.Unmarshal([]byte(paramsJSON), &params); err != nil {
			return nil, fmt.Errorf("--params: not a JSON object: %w", err)
		}
		if params == nil {
			return nil, fmt.Errorf("--params: not a JSON object: %s", paramsJSON)
		}
	}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("parameter %q: want KEY=VALUE", kv)
		}
		params[k] = paramValue(v)
	}
	return params, nil
}

// paramValue reads v as JSON when it is JSON, else as a plain string.
func paramValue(v string) any {
	var j any
	if err := json.Unmarshal([]byte(v), &j); err == nil {
		return j
	}
	return v
}
