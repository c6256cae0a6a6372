package agent

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// instrumentedCopies lists the instrumented copies of wasm in the compile
// cache under cache.
func instrumentedCopies(t *testing.T, cache string, wasm []byte) []string {
	t.Helper()
	sum := sha256.Sum256(wasm)
	found, err := filepath.Glob(filepath.Join(cache, "cost-model-*", "metered", hex.EncodeToString(sum[:])+".wasm"))
	require.NoError(t, err)
	return found
}

// withVersion is the signed module wasm as version v, signed again with
// the test key.
func withVersion(t *testing.T, wasm []byte, v string) []byte {
	t.Helper()
	mod, err := manifest.FromWasm(wasm)
	require.NoError(t, err)
	mod.Manifest.Version = v
	return packed(t, wasm, mod.Manifest)
}

func TestADeployRemovesTheReplacedVersionFromTheCompileCache(t *testing.T) {
	data := t.TempDir()
	cache := filepath.Join(data, "compile-cache")
	a := offlineAgent(t, data)
	v1 := testenv.ReadSigned(t, "signed_echo")
	require.Equal(t, protocol.ResultSuccess, install(t, a, "signed_echo", "").Status)
	require.Len(t, instrumentedCopies(t, cache, v1), 1)

	v2 := withVersion(t, v1, "2.0.0")
	res := installModule(t, a, v2, "")
	require.Equal(t, protocol.ResultSuccess, res.Status, res.Error)
	require.Equal(t, true, res.Result.(map[string]any)["replaced"])
	assert.Empty(t, instrumentedCopies(t, cache, v1), "the replaced version's copy is removed")
	assert.Len(t, instrumentedCopies(t, cache, v2), 1)
	out := run(a, "signed_echo", map[string]any{"version": "2"})
	assert.Equal(t, protocol.ResultSuccess, out.Status, out.Error)
}

func TestAtStartTheAgentPrunesItsOwnCompileCacheButNotASharedOne(t *testing.T) {
	echo, err := os.ReadFile(filepath.Join(testenv.TestdataTools(), "echo.wasm"))
	require.NoError(t, err)
	sidecar, err := os.ReadFile(filepath.Join(testenv.TestdataTools(), "echo.json"))
	require.NoError(t, err)
	for _, shared := range []bool{false, true} {
		data, tools := t.TempDir(), t.TempDir()
		cfg := Config{DataDir: data, ToolDirs: []string{tools}}
		cache := filepath.Join(data, "compile-cache")
		if shared {
			cache = t.TempDir()
			cfg.CompileCacheDir = cache
		}
		require.NoError(t, os.WriteFile(filepath.Join(tools, "echo.wasm"), echo, 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(tools, "echo.json"), sidecar, 0o600))
		a := newOfflineAgent(t, cfg)
		out := run(a, "echo", map[string]any{"hi": "there"})
		require.Equal(t, protocol.ResultSuccess, out.Status, out.Error)
		require.NoError(t, a.Close(t.Context()))
		require.Len(t, instrumentedCopies(t, cache, echo), 1)

		require.NoError(t, os.Remove(filepath.Join(tools, "echo.wasm")), "the operator takes echo out")
		newOfflineAgent(t, cfg)
		if shared {
			assert.Len(t, instrumentedCopies(t, cache, echo), 1, "a shared cache is left alone: another agent may use echo")
		} else {
			assert.Empty(t, instrumentedCopies(t, cache, echo), "echo's copy went with it")
		}
	}
}

// cacheListing is every file under the compile cache dir, with its size.
func cacheListing(t *testing.T, cache string) map[string]int64 {
	t.Helper()
	files := map[string]int64{}
	require.NoError(t, filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(cache, p)
		files[rel] = info.Size()
		return nil
	}))
	return files
}

// Issue 38: a start whose policy refuses every tool (a trusted key, and
// stock tools that nobody signed) left the compile cache empty, and the
// corrected start after it compiled everything again. What a start refuses
// keeps its entry: its module file is still there.
func TestAStartThatRefusesEveryToolKeepsTheCompileCache(t *testing.T) {
	data := t.TempDir()
	cache := filepath.Join(data, "compile-cache")
	files := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(files, "f"), []byte("kiosk"), 0o644))
	cfg := Config{DataDir: data, ToolDirs: []string{"stock=" + testenv.StockToolsDir(t)},
		Mounts: []sandbox.Mount{{HostPath: files, GuestPath: "/files"}}}
	a := newOfflineAgent(t, cfg)
	for _, name := range testenv.StockTools {
		params := map[string]any{"path": "/files/f"}
		if name == "write_file" {
			params["content"] = "kiosk"
		} else if name == "list_dir" {
			params["path"] = "/files"
		}
		out := run(a, name, params)
		require.Equal(t, protocol.ResultSuccess, out.Status, "%s: %s", name, out.Error)
	}
	require.NoError(t, a.Close(t.Context()))
	before := cacheListing(t, cache)
	require.NotEmpty(t, before)

	strict := cfg
	strict.TrustedKeys = []ed25519.PublicKey{testenv.TestKey(t)}
	b := newOfflineAgent(t, strict)
	require.Len(t, b.tools.Refusals(), len(testenv.StockTools), "every stock tool is refused: none is signed")
	require.NoError(t, b.Close(t.Context()))
	assert.Equal(t, before, cacheListing(t, cache), "the compile cache holds what it held before")
}
