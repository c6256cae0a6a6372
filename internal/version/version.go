// Package version is the build's own version: the release that
// make build VERSION=1.2.3 stamped into it, or, in a development build,
// the commit it was built from. The three binaries print it
// (aip-agent --version, aip-server --version, aipctl version), the agent
// reports it at registration, to the MCP servers it proxies and in its
// user agents, and the server answers it on GET /api/version.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// What the linker stamps, as the Makefile does:
//
//	-X github.com/edgeaip/edgeaip/internal/version.release=1.2.3
//	-X github.com/edgeaip/edgeaip/internal/version.commit=<hash>
//	-X github.com/edgeaip/edgeaip/internal/version.modified=true
//
// They are variables only because the linker sets nothing else; nothing
// writes them at run time. Unstamped, the commit comes from what go build
// recorded of the work tree (vcs.revision, vcs.modified).
var (
	release  string
	commit   string
	modified string
)

// Info is what a binary knows of its own build.
type Info struct {
	// Version is the release's version ("1.2.3"), or, for a development
	// build, "dev-" and the commit's first 12 digits ("dev-3f2a1b9c0d1e"),
	// with "-dirty" when the work tree had changes not committed, or
	// "dev" alone when the commit is unknown.
	Version string `json:"version"`
	// Commit is the full hash of the commit built, or "" when unknown.
	Commit string `json:"commit,omitempty"`
	// Modified says the work tree had changes not committed.
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

// Get is this binary's Info.
func Get() Info {
	return build(release, commit, modified == "true", vcs())
}

// Version is Get's Version: what the agent reports and user agents carry.
func Version() string { return Get().Version }

// build is the Info of a binary stamped with release, commit and
// modified, whose go build recorded recorded (vcs.revision and
// vcs.modified, when it ran in a work tree).
func build(release, commit string, modified bool, recorded map[string]string) Info {
	if commit == "" {
		commit, modified = recorded["vcs.revision"], recorded["vcs.modified"] == "true"
	}
	i := Info{Version: release, Commit: commit, Modified: modified, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if release == "" {
		i.Version = devVersion(commit, modified)
	}
	return i
}

// devVersion names a development build by its commit.
func devVersion(commit string, modified bool) string {
	if commit == "" {
		return "dev"
	}
	v := "dev-" + commit[:min(12, len(commit))]
	if modified {
		v += "-dirty"
	}
	return v
}

// vcs is what go build recorded of the version control system
// (vcs.revision, vcs.modified, ...); empty for a build outside a work
// tree, with -buildvcs=false, or of a test.
func vcs() map[string]string {
	out := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if strings.HasPrefix(s.Key, "vcs.") {
				out[s.Key] = s.Value
			}
		}
	}
	return out
}

// Development reports whether this is a development build: one that no
// release version was stamped into.
func (i Info) Development() bool { return i.Version == "dev" || strings.HasPrefix(i.Version, "dev-") }

// String is the version for people, as --version prints it after the
// binary's name: "1.2.3 (commit 3f2a1b9c0d1e…, go1.26.8, linux/arm64)",
// or for a development build "dev-3f2a1b9c0d1e (a development build of
// commit 3f2a1b9c0d1e…, go1.26.8, linux/amd64)".
func (i Info) String() string {
	var what string
	switch {
	case i.Development() && i.Commit == "":
		what = "a development build of an unknown commit"
	case i.Development():
		what = "a development build of commit " + i.Commit
	default:
		what = "commit " + i.Commit
		if i.Commit == "" {
			what = "commit unknown"
		}
	}
	if i.Modified {
		what += " with changes not committed"
	}
	return fmt.Sprintf("%s (%s, %s, %s/%s)", i.Version, what, i.Go, i.OS, i.Arch)
}
