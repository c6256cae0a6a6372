package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/edgeaip/edgeaip/internal/version"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/spf13/cobra"
)

// versions is what aipctl version prints: aipctl's own, and the server's
// or why it is missing.
type versions struct {
	Client version.Info `json:"client"`
	// ServerURL is the server asked, if one was.
	ServerURL string       `json:"server_url,omitempty"`
	Server    *api.Version `json:"server,omitempty"`
	// ServerError says why the server's version is missing: not asked
	// (--client, or no operator token), or not reached.
	ServerError string `json:"server_error,omitempty"`
}

func newVersionCmd(g *globals) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print aipctl's version, commit, Go version and platform, and the server's",
		Long: "Print aipctl's version, commit, Go version and platform, and then the server's (GET /api/version), " +
			"with the version of the devices' wire it speaks. The server is asked when an operator token is given; " +
			"one that cannot be reached is said so, and the exit code is 3. --client asks no server.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, err := askVersions(cmd, g, clientOnly)
			if g.json() {
				if perr := printJSON(cmd.OutOrStdout(), v); perr != nil {
					return perr
				}
			} else {
				printVersions(cmd.OutOrStdout(), v, clientOnly)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print aipctl's version only; ask no server")
	return cmd
}

// askVersions is aipctl's version and, unless clientOnly, the server's:
// the error is the server's, when a token was given but the server did
// not answer.
func askVersions(cmd *cobra.Command, g *globals, clientOnly bool) (versions, error) {
	v := versions{Client: version.Get()}
	if clientOnly {
		return v, nil
	}
	c, err := g.client()
	if errors.Is(err, errNoToken) {
		v.ServerError = "not asked: " + err.Error()
		return v, nil
	}
	if err != nil {
		return v, err
	}
	v.ServerURL = c.BaseURL
	sv, err := c.Version(cmd.Context())
	if err != nil {
		err = apiFailure(err)
		v.ServerError = "not reached: " + err.Error()
		return v, &exitError{exitCode(err), nil}
	}
	v.Server = &sv
	return v, nil
}

// exitCode is the code err exits with.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailed
}

// printVersions prints v for people: a line for aipctl, one for the
// server.
func printVersions(w io.Writer, v versions, clientOnly bool) {
	fmt.Fprintln(w, "aipctl", v.Client)
	switch {
	case clientOnly:
	case v.Server != nil:
		s := version.Info{Version: v.Server.Version, Commit: v.Server.Commit, Modified: v.Server.Modified, Go: v.Server.Go, OS: v.Server.OS, Arch: v.Server.Arch}
		fmt.Fprintf(w, "aip-server %s at %s, speaking %s to devices\n", s, v.ServerURL, v.Server.Wire)
	case v.ServerURL != "":
		fmt.Fprintf(w, "aip-server at %s: %s\n", v.ServerURL, v.ServerError)
	default:
		fmt.Fprintf(w, "aip-server: %s\n", v.ServerError)
	}
}
