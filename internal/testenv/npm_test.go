package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheNPMPinsAreTheMakefiles(t *testing.T) {
	pins, err := npmPins()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"@modelcontextprotocol/server-everything": "2026.8.31",
		"@modelcontextprotocol/server-filesystem": "2026.8.31",
		"@playwright/mcp":                         "0.0.83",
		"@modelcontextprotocol/sdk":               "1.32.2",
		"@modelcontextprotocol/inspector":         "2.12.0",
		"@modelcontextprotocol/client":            "2.3.1",
		"@modelcontextprotocol/ext-tasks":         "0.2.2",
	}, pins, "the versions issues 5 and 6 name, the MCP clients of issue 22, and the v2 client with the tasks extension's requester of issue 41")
}

func TestANodePackageMustBeThePinnedVersion(t *testing.T) {
	pins := map[string]string{"@playwright/mcp": "0.0.83"}
	cache := t.TempDir()
	install := func(version string) string {
		dir := filepath.Join(cache, "node_modules", "@playwright", "mcp")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name": "@playwright/mcp", "version": "`+version+`"}`), 0o644))
		return dir
	}

	_, err := pinnedPackage(cache, "@playwright/mcp", pins)
	assert.ErrorIs(t, err, errNotInstalled)
	assert.ErrorContains(t, err, "@playwright/mcp@0.0.83 is not installed")

	dir := install("0.0.83")
	got, err := pinnedPackage(cache, "@playwright/mcp", pins)
	require.NoError(t, err)
	assert.Equal(t, dir, got)

	install("0.0.90")
	_, err = pinnedPackage(cache, "@playwright/mcp", pins)
	assert.NotErrorIs(t, err, errNotInstalled, "a test fails rather than skips on another version")
	assert.ErrorContains(t, err, `is version "0.0.90", not the pinned "0.0.83"`)

	_, err = pinnedPackage(cache, "left-pad", pins)
	assert.ErrorContains(t, err, "left-pad is not pinned in the Makefile's NPM_PACKAGES")
}
