package scaffold

import (
	"go/build/constraint"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Building, packing and running what Write writes is aipctl's test
// (cmd/aipctl, TestToolInitWritesAToolThatBuildsPacksAndRuns), as a user
// does it.

func TestWriteGivesAGoToolItsManifestAndACopyOfTheSDK(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "greet")
	files, err := Write(dir, "greet", Go)
	require.NoError(t, err)
	assert.Contains(t, files, "main.go")
	assert.Contains(t, files, "go.mod")
	assert.Contains(t, files, "Makefile")
	assert.Contains(t, files, "edgeaip-sdk/go.mod")
	assert.Contains(t, files, "edgeaip-sdk/wasmtools/sdk/sdk.go")
	assert.Contains(t, files, "edgeaip-sdk/wasmtools/sdk/reactor/reactor.go")
	for _, f := range files {
		assert.NotContains(t, f, "_test.go", "the SDK's tests, and their dependencies, stay behind")
		assert.FileExists(t, filepath.Join(dir, filepath.FromSlash(f)))
	}

	m := readManifest(t, filepath.Join(dir, "greet.json"))
	assert.Equal(t, "greet", m.Name)
	assert.Equal(t, manifest.InitSnapshot, m.Init)
	assert.Equal(t, []any{"name"}, m.InputSchema["required"])

	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	assert.Contains(t, string(gomod), "replace github.com/edgeaip/edgeaip => ./edgeaip-sdk\n")
	sdkmod, err := os.ReadFile(filepath.Join(dir, "edgeaip-sdk", "go.mod"))
	require.NoError(t, err)
	assert.Contains(t, string(sdkmod), "\nmodule github.com/edgeaip/edgeaip\n")

	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
}

func TestWriteGivesACToolItsSourceAndManifest(t *testing.T) {
	dir := t.TempDir() // exists, empty: taken
	files, err := Write(dir, "count_2", C)
	require.NoError(t, err)
	assert.Equal(t, []string{".gitignore", "Makefile", "README.md", "count_2.c", "count_2.json"}, files)
	assert.Equal(t, "count_2", readManifest(t, filepath.Join(dir, "count_2.json")).Name)
}

func TestWriteRefusesAndLeavesNothing(t *testing.T) {
	parent := t.TempDir()
	_, err := Write(filepath.Join(parent, "x"), "a b", Go)
	assert.EqualError(t, err, `tool name "a b": want 1-64 of [A-Za-z0-9_-], not starting with '-'`)
	var refused *ArgumentError
	assert.ErrorAs(t, err, &refused)
	_, err = Write(filepath.Join(parent, "x"), "x", "zig")
	assert.EqualError(t, err, `language "zig": want go, c or rust`)
	assert.ErrorAs(t, err, &refused)

	taken := filepath.Join(parent, "taken")
	require.NoError(t, os.MkdirAll(taken, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(taken, "main.go"), []byte("mine"), 0o644))
	_, err = Write(taken, "taken", Go)
	assert.EqualError(t, err, taken+": exists and is not empty")
	assert.ErrorAs(t, err, &refused)

	entries, err := os.ReadDir(parent)
	require.NoError(t, err)
	require.Len(t, entries, 1, "nothing but the taken dir")
	b, err := os.ReadFile(filepath.Join(taken, "main.go"))
	require.NoError(t, err)
	assert.Equal(t, "mine", string(b))
}

func TestTheSDKsGoVersionIsTheOneItsConstraintsRequire(t *testing.T) {
	for line, want := range map[string]int{
		"//go:build go1.26 && !go1.27":    26,
		"//go:build !(go1.26 && !go1.27)": 0,
		"//go:build go1.21 || go1.22":     0,
		"//go:build wasip1 && go1.24":     24,
		"//go:build wasip1":               0,
	} {
		expr, err := constraint.Parse(line)
		require.NoError(t, err)
		assert.Equal(t, want, requiredGo(expr), line)
	}
	v, err := sdkGoVersion()
	require.NoError(t, err)
	assert.Regexp(t, `^1\.\d+\.0$`, v)
	assert.True(t, strings.HasPrefix(v, "1.2"), "the SDK is written for a Go of today: %s", v)
}

func readManifest(t *testing.T, path string) manifest.Manifest {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	m, err := manifest.Parse(b)
	require.NoError(t, err)
	return m
}
