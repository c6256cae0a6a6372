package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
	"github.com/spf13/cobra"
)

func newAgentCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Publish signed releases of aip-agent, and list them",
		Long: `A release is a build of aip-agent for one OS and architecture, under a
version, signed with an ed25519 release key. The server keeps it by its
SHA-256; a rollout naming "agent: VERSION" brings devices to it, and each
device checks its signature against the release keys it trusts
(aip-agent --release-key) before it installs it and again before each start.

A release key is made as a tool key is, and kept apart from tool keys:
  aipctl tool keygen -o release              # once: release.key, release.pub (--release-key on agents)
  make cross VERSION=1.2.3
  aipctl agent publish bin/cross/aip-agent-linux-arm64 --version 1.2.3 --key release.key
  aipctl agent releases`,
	}
	cmd.AddCommand(newAgentPublishCmd(g), newAgentReleasesCmd(g))
	return cmd
}

func newAgentPublishCmd(g *globals) *cobra.Command {
	var version, goos, goarch, keyPath string
	cmd := &cobra.Command{
		Use:   "publish FILE --version V --key KEY [--os linux] [--arch arm64]",
		Short: "Sign an aip-agent binary with a release key and upload it as a release",
		Long: `Sign an aip-agent binary with a release key and upload it as the release
of --version for its OS and architecture. These default to what the file's
ELF header says; flags that say otherwise are refused before anything is
sent, naming both. The signature covers the version, OS, architecture,
digest and size. Publishing the same release again changes nothing; the
server refuses another binary, or another signature, under a version, OS
and architecture it keeps, naming the digest it keeps.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			priv, err := signature.LoadPrivateKey(keyPath)
			if err != nil {
				return &exitError{exitUsage, fmt.Errorf("--key: %w", err)}
			}
			f, err := os.Open(args[0])
			if err != nil {
				return &exitError{exitUsage, err}
			}
			defer f.Close()
			rel, err := describeRelease(args[0], f, version, goos, goarch)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			rel = agentrelease.Sign(rel, priv)
			c, err := g.client()
			if err != nil {
				return err
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return &exitError{exitFailed, fmt.Errorf("%s: %w", args[0], err)}
			}
			out, err := c.PublishRelease(cmd.Context(), rel, f)
			if err != nil {
				return apiFailure(fmt.Errorf("%s: %w", args[0], err))
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), out)
			}
			what := "published"
			if out.Unchanged {
				what = "unchanged: already published"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "aip-agent %s for %s/%s: %s (sha256 %s, %s, key id %s)\n",
				out.Version, out.OS, out.Arch, what, out.SHA256, sizeText(out.Size), out.KeyID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&version, "version", "", "the release's version, as the binary was stamped (make build VERSION=...) (required)")
	f.StringVar(&keyPath, "key", "", "the release key, PEM (aipctl tool keygen); not a tool-signing key (required)")
	f.StringVar(&goos, "os", "", "the OS it runs on, as GOOS (default: what its ELF header says)")
	f.StringVar(&goarch, "arch", "", "the architecture it runs on, as GOARCH (default: what its ELF header says)")
	cmd.MarkFlagRequired("version")
	cmd.MarkFlagRequired("key")
	return cmd
}

// describeRelease is the release of version the binary path, open as f,
// makes, unsigned: its platform (releasePlatform), digest and size,
// checked as the server and devices check them.
func describeRelease(path string, f *os.File, version, goos, goarch string) (agentrelease.Release, error) {
	rel := agentrelease.Release{Version: version}
	var err error
	if rel.OS, rel.Arch, err = releasePlatform(path, f, goos, goarch); err != nil {
		return rel, err
	}
	h := sha256.New()
	if rel.Size, err = io.Copy(h, io.NewSectionReader(f, 0, agentrelease.MaxSize+1)); err != nil {
		return rel, fmt.Errorf("%s: %w", path, err)
	}
	rel.SHA256 = hex.EncodeToString(h.Sum(nil))
	if err := rel.Check(); err != nil {
		return rel, fmt.Errorf("%s: %w", path, err)
	}
	return rel, nil
}

func newAgentReleasesCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "releases",
		Short: "List the agent releases the server keeps, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(cmd, g, (*api.Client).Releases, printReleases)
		},
	}
}

func printReleases(w io.Writer, all []api.Release) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tOS\tARCH\tSHA256\tSIZE\tKEY\tPUBLISHED\tBY")
	for _, r := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.12s\t%s\t%s\t%s\t%s\n", r.Version, r.OS, r.Arch, r.SHA256, sizeText(r.Size), r.KeyID,
			r.PublishedAt.Local().Format(time.DateTime), orDash(r.PublishedBy))
	}
	return tw.Flush()
}

// sizeText is n bytes as a person reads them: 11.2 MiB.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
