package version

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAReleaseIsTheVersionStampedIntoIt(t *testing.T) {
	i := build("1.2.3", "3f2a1b9c0d1e4f5a6b7c8d9e0f1a2b3c4d5e6f7a", false, map[string]string{"vcs.revision": "ignored"})
	assert.Equal(t, "1.2.3", i.Version)
	assert.Equal(t, "3f2a1b9c0d1e4f5a6b7c8d9e0f1a2b3c4d5e6f7a", i.Commit)
	assert.False(t, i.Development())
	assert.Equal(t, "1.2.3 (commit 3f2a1b9c0d1e4f5a6b7c8d9e0f1a2b3c4d5e6f7a, "+runtime.Version()+", "+runtime.GOOS+"/"+runtime.GOARCH+")", i.String())
}

func TestADevelopmentBuildNamesItsCommit(t *testing.T) {
	i := build("", "3f2a1b9c0d1e4f5a6b7c8d9e0f1a2b3c4d5e6f7a", true, nil)
	assert.Equal(t, "dev-3f2a1b9c0d1e-dirty", i.Version)
	assert.True(t, i.Development())
	assert.Contains(t, i.String(), "a development build of commit 3f2a1b9c0d1e4f5a6b7c8d9e0f1a2b3c4d5e6f7a with changes not committed")
}

// go build without make: the commit is the one go build recorded.
func TestAnUnstampedBuildTakesTheCommitGoBuildRecorded(t *testing.T) {
	i := build("", "", false, map[string]string{"vcs.revision": "0123456789abcdef0123", "vcs.modified": "false"})
	assert.Equal(t, "dev-0123456789ab", i.Version)
	assert.Equal(t, "0123456789abcdef0123", i.Commit)
	assert.False(t, i.Modified)
}

func TestABuildThatKnowsNoCommitSaysSo(t *testing.T) {
	i := build("", "", false, map[string]string{})
	assert.Equal(t, "dev", i.Version)
	assert.True(t, i.Development())
	assert.Contains(t, i.String(), "a development build of an unknown commit")
}
