// Command aipctl is the operator's and the tool author's command line for
// edgeaip: enroll devices, run tools and plans on them (on one, or on a
// fleet by labels), follow tasks live, and build, sign and deploy tools.
//
// It reads the server URL from AIP_SERVER or --server (default
// http://127.0.0.1:8700) and the operator token from AIP_TOKEN or
// --token-file; an https:// server's certificate is checked against the
// CAs of AIP_CA or --ca, else the system's. aipctl operator manages the
// identities tokens act for, and aipctl audit reads who did what. Every
// command takes -o json, for scripts; a command that writes a file names
// it with --out. aipctl completion prints shell completion scripts.
//
// Exit codes (the README's table): 0 ok, 1 the command or task failed, 2
// usage error or a request the server refused as wrong, 3 the server
// unreachable, refusing the credential or the role, or asking to slow
// down, 130 interrupted (Ctrl-C, as shells report a SIGINT).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitUnreachable = 3
	exitInterrupted = 130
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := execute(ctx, newRoot())
	stop()
	if err == nil {
		os.Exit(exitOK)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(os.Stderr, "aipctl:", ee.err)
		}
		os.Exit(ee.code)
	}
	// Anything else is cobra's: a usage error.
	fmt.Fprintln(os.Stderr, "aipctl:", err)
	os.Exit(exitUsage)
}

// execute runs root under ctx. A command that fails once ctx has ended
// (Ctrl-C) failed because it was interrupted, whatever it says: it exits
// with exitInterrupted, not as if the server were unreachable.
func execute(ctx context.Context, root *cobra.Command) error {
	err := root.ExecuteContext(ctx)
	if err == nil || ctx.Err() == nil {
		return err
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return &exitError{exitInterrupted, ee.err}
	}
	return &exitError{exitInterrupted, err}
}

func newRoot() *cobra.Command {
	var g globals
	root := &cobra.Command{
		Use:           "aipctl",
		Short:         "Operate an edgeaip fleet and build its tools",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.PersistentFlags().StringVar(&g.server, "server", "", "server URL (default $AIP_SERVER or http://127.0.0.1:8700)")
	root.PersistentFlags().StringVar(&g.tokenFile, "token-file", "", "file holding the operator token (default: the token itself, from $AIP_TOKEN)")
	root.PersistentFlags().StringVar(&g.ca, "ca", "", "PEM file of the CAs an https:// server's certificate is checked against (default $AIP_CA, else the system's)")
	root.PersistentFlags().DurationVar(&g.replyTimeout, "reply-timeout", api.DefaultReplyTimeout,
		"how long to wait for the server's reply, on top of the --timeout a command asks of it")
	root.PersistentFlags().DurationVar(&g.preparationWait, "preparation-wait", api.DefaultPreparationWait,
		"how much longer than its --timeout to wait for a command or a deploy whose device prepares the tool: the server's --preparation-bound")
	root.PersistentFlags().DurationVar(&g.serverSilence, "server-silence", api.DefaultServerSilence,
		"while a command or a deploy waits, give up once the server has answered nothing, not even a health check, for this long: it hangs or is gone, and the outcome is unknown")
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "table", "output format: table (for people) or json (for scripts)")
	root.RegisterFlagCompletionFunc("output", completeFormats)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if err := warnLegacyFormat(cmd, &g); err != nil {
			return err
		}
		if g.output != "table" && g.output != "json" {
			taken, err := takeLegacyOutFile(cmd, &g)
			if err != nil {
				return err
			}
			if !taken {
				return &exitError{exitUsage, fmt.Errorf("--output: want table or json, got %q", g.output)}
			}
		}
		if g.replyTimeout <= 0 {
			return &exitError{exitUsage, fmt.Errorf("--reply-timeout: %s is not a positive duration", g.replyTimeout)}
		}
		if g.preparationWait <= 0 {
			return &exitError{exitUsage, fmt.Errorf("--preparation-wait: %s is not a positive duration", g.preparationWait)}
		}
		if g.serverSilence <= 0 {
			return &exitError{exitUsage, fmt.Errorf("--server-silence: %s is not a positive duration", g.serverSilence)}
		}
		return nil
	}
	root.AddCommand(newDevicesCmd(&g), newDeviceCmd(&g), newRolloutCmd(&g), newAgentCmd(&g), newToolsCmd(&g), newExecCmd(&g),
		newDispatchCmd(&g), newPlanCmd(&g), newTaskCmd(&g), newTasksCmd(&g), newCancelCmd(&g), newToolCmd(&g),
		newOperatorCmd(&g), newAuditCmd(&g), newVersionCmd(&g))
	return root
}
