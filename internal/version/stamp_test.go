package version_test

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// make build VERSION=… stamps all three binaries, and each prints it:
// built here with the Makefile's own rule, into a directory of the test's.
func TestMakeBuildStampsTheVersionIntoEveryBinary(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	bin := t.TempDir()
	names := []string{"aip-agent", "aip-server", "aipctl"}
	args := []string{"-C", testenv.Root(), "--no-print-directory", "BIN=" + bin, "GO=" + testenv.Go(), "VERSION=9.9.9-test"}
	for _, n := range names {
		args = append(args, filepath.Join(bin, n))
	}
	out, err := exec.Command("make", args...).CombinedOutput()
	require.NoError(t, err, "%s", out)

	commit := gitHead(t)
	for _, run := range [][]string{{"aip-agent", "--version"}, {"aip-server", "--version"}, {"aipctl", "version", "--client"}} {
		out, err := exec.Command(filepath.Join(bin, run[0]), run[1:]...).CombinedOutput()
		require.NoError(t, err, "%s %s: %s", run[0], run[1], out)
		assert.Regexp(t, `^`+run[0]+` 9\.9\.9-test \(commit `+commit+`( with changes not committed)?, go1\.\S+, \w+/\w+\)\n$`, string(out), "%s %s", run[0], run[1])
	}
}

// Unstamped by make, a binary is a development build that names its
// commit (git rev-parse HEAD).
func TestMakeBuildWithoutAVersionIsADevelopmentBuildOfItsCommit(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	bin, commit := t.TempDir(), gitHead(t)
	out, err := exec.Command("make", "-C", testenv.Root(), "--no-print-directory", "BIN="+bin, "GO="+testenv.Go(), filepath.Join(bin, "aipctl")).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command(filepath.Join(bin, "aipctl"), "version", "--client").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Regexp(t, `^aipctl dev-`+commit[:12]+`(-dirty)? \(a development build of commit `+commit+`( with changes not committed)?, go1\.\S+, \w+/\w+\)\n$`, string(out))
}

// go build alone gives the commit go build recorded of the work tree,
// if it recorded one: not with -buildvcs=false, which this machine's go
// env sets, nor in a git worktree, where go build records nothing. The
// binary then says that its commit is unknown.
func TestGoBuildAloneGivesTheCommitItRecorded(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "aipctl")
	cmd := exec.Command(testenv.Go(), "build", "-buildvcs=auto", "-o", bin, "./cmd/aipctl")
	cmd.Dir = testenv.Root()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	recorded, err := exec.Command(testenv.Go(), "version", "-m", bin).Output()
	require.NoError(t, err)
	want := `^aipctl dev \(a development build of an unknown commit, `
	if m := regexp.MustCompile(`vcs\.revision=([0-9a-f]+)`).FindSubmatch(recorded); m != nil {
		commit := string(m[1])
		want = `^aipctl dev-` + commit[:12] + `(-dirty)? \(a development build of commit ` + commit
	}
	out, err = exec.Command(bin, "version", "--client").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Regexp(t, want, string(out), "go version -m says:\n%s", recorded)
}

// make build VERSION=… refuses what is not a release version: a
// development build is one that none was stamped into.
func TestMakeBuildRefusesAVersionThatIsNoRelease(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	bin := t.TempDir()
	out, err := exec.Command("make", "-C", testenv.Root(), "BIN="+bin, "VERSION=dev-1", filepath.Join(bin, "aipctl")).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "VERSION=dev-1: want a release version such as 1.2.3")
}

// gitHead is the commit of the work tree the test runs in.
func gitHead(t *testing.T) string {
	out, err := exec.Command("git", "-C", testenv.Root(), "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}
