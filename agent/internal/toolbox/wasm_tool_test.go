package toolbox

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/edgeaip/edgeaip/agent/internal/logtest"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newLoader(t *testing.T, cfg config.Config) *loader {
	t.Helper()
	ctx := context.Background()
	sb, err := sandbox.New(ctx, sandbox.NewConfig())
	require.NoError(t, err)
	t.Cleanup(func() { sb.Close(ctx) })
	return New(sb, cfg, logtest.Quiet, func() {}).loader
}

// loadNames loads dir and returns the names of the tools loaded and, by
// file name, the errors of those refused.
func loadNames(t *testing.T, l *loader, dir string) ([]string, map[string]string) {
	t.Helper()
	tools, refused, err := l.loadDir(context.Background(), toolDir{Namespace: "ns", Path: dir})
	require.NoError(t, err)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Info().ToolName)
	}
	errs := map[string]string{}
	for _, r := range refused {
		errs[filepath.Base(r.Path)] = r.Error
	}
	return names, errs
}

func TestOnceAKeyIsTrustedOnlyModulesItSignedLoad(t *testing.T) {
	l := newLoader(t, config.Config{TrustedKeys: []ed25519.PublicKey{testenv.TestKey(t)}})
	names, refused := loadNames(t, l, testenv.SignedTools())
	assert.Equal(t, []string{"signed_echo"}, names)
	assert.Contains(t, refused["unsigned_echo.wasm"], `tool "unsigned_echo" (`)
	assert.Contains(t, refused["unsigned_echo.wasm"], `refused: module is not signed, and this host requires signed modules (require_signed)`)
	assert.Contains(t, refused["foreign_echo.wasm"], "refused: signed by a key this host does not trust: key id 7e001badae38bbba")
	assert.Contains(t, refused["tampered_echo.wasm"], "refused: signature does not match the module: it was altered after signing")
}

func TestRequireSignedRefusesSidecarManifests(t *testing.T) {
	// A module signed with a trusted key, but described by a sidecar that
	// the signature does not cover.
	priv, err := signature.LoadPrivateKey(filepath.Join(testenv.Root(), "testdata", "keys", "test.key"))
	require.NoError(t, err)
	echo, err := os.ReadFile(filepath.Join(testenv.TestdataTools(), "echo.wasm"))
	require.NoError(t, err)
	signed, err := signature.Sign(echo, priv)
	require.NoError(t, err)
	sidecar, err := os.ReadFile(filepath.Join(testenv.TestdataTools(), "echo.json"))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "echo.wasm"), signed, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "echo.json"), sidecar, 0o644))

	l := newLoader(t, config.Config{TrustedKeys: []ed25519.PublicKey{testenv.TestKey(t)}})
	names, refused := loadNames(t, l, dir)
	assert.Empty(t, names)
	assert.Contains(t, refused["echo.wasm"], "refused: its manifest is a sidecar NAME.json, which no signature covers")
}

func TestWithoutRequireSignedATamperedModuleIsStillRefused(t *testing.T) {
	optional := false
	l := newLoader(t, config.Config{TrustedKeys: []ed25519.PublicKey{testenv.TestKey(t)}, RequireSigned: &optional})
	names, refused := loadNames(t, l, testenv.SignedTools())
	assert.ElementsMatch(t, []string{"signed_echo", "unsigned_echo", "foreign_echo"}, names)
	assert.Len(t, refused, 1)
	assert.Contains(t, refused["tampered_echo.wasm"], "signature does not match")
}

func TestInventoryShowsSignerCapabilitiesAndGrants(t *testing.T) {
	data := t.TempDir()
	optional := false
	l := newLoader(t, config.Config{
		TrustedKeys:   []ed25519.PublicKey{testenv.TestKey(t)},
		RequireSigned: &optional,
		Policies:      map[string]sandbox.Policy{"ns.escape_symlink": {Dirs: []sandbox.Mount{{HostPath: data, GuestPath: "/data", ReadOnly: true}}}},
	})
	signed, err := l.loadFile(context.Background(), "ns", filepath.Join(testenv.SignedTools(), "signed_echo.wasm"))
	require.NoError(t, err)
	meta := signed.Info().Meta
	assert.Equal(t, "verified", meta["signature"])
	assert.Equal(t, "1612c7e7b57e11e8", meta["signer"])
	assert.Equal(t, "1.0.0", meta["version"])
	assert.Equal(t, "embedded", meta["manifest"])
	assert.Len(t, meta["sha256"], 64)
	assert.Equal(t, "command", meta["start"], "each call runs _start")

	escape, err := l.loadFile(context.Background(), "ns", filepath.Join(testenv.TestdataTools(), "escape_symlink.wasm"))
	require.NoError(t, err)
	meta = escape.Info().Meta
	assert.Equal(t, "none", meta["signature"])
	assert.Equal(t, "sidecar", meta["manifest"])
	assert.Equal(t, map[string]any{"dirs": []any{map[string]any{"path": "*", "mode": "rw"}}}, meta["capabilities"])
	assert.Equal(t, map[string]any{"dirs": []any{map[string]any{"path": "/data", "mode": "ro"}}}, meta["granted"], "rw requested, ro granted")
}

func TestInventoryShowsThatAReactorStartsFromASnapshot(t *testing.T) {
	l := newLoader(t, config.Config{})
	dir := t.TempDir()
	c := filepath.Join(testenv.Root(), "wasmtools", "examples", "c", "dir_usage", "dir_usage.wasm")
	b, err := os.ReadFile(c)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dir_usage.wasm"), b, 0o644))
	tool, err := l.loadFile(context.Background(), "ns", filepath.Join(dir, "dir_usage.wasm"))
	require.NoError(t, err)
	assert.Equal(t, "snapshot", tool.Info().Meta["start"])
}
